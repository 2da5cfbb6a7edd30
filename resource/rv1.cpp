#include "resource/rv1.hpp"

#include <fmt/format.h>

#include "core/json_parse.hpp"

namespace banyan {
namespace {

Error bad(std::string what) {
    return make_error(EINVAL, "R: " + std::move(what));
}

Result<IdSet> idset_at(const nlohmann::json& j, const std::string& path) {
    if (!j.is_string())
        return bad(path + ": expected an idset string");
    auto set = IdSet::parse(j.get<std::string>());
    if (!set)
        return bad(path + ": " + set.error().message);
    return set;
}

}  // namespace

IdSet Rv1::rank_set() const {
    IdSet set;
    for (const auto& [rank, children] : ranks)
        set.insert(rank);
    return set;
}

nlohmann::json Rv1::to_json() const {
    // Group ranks by identical children, keeping first-appearance order.
    std::vector<std::pair<RankChildren, IdSet>> groups;
    for (const auto& entry : ranks) {
        const RankChildren& children = entry.second;
        auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == children; });
        if (it == groups.end())
            groups.push_back({children, IdSet{entry.first}});
        else
            it->second.insert(entry.first);
    }
    nlohmann::json lite = nlohmann::json::array();
    for (const auto& [children, set] : groups) {
        nlohmann::json c = {{"core", children.cores.format()}};
        if (!children.gpus.empty())
            c["gpu"] = children.gpus.format();
        nlohmann::json entry = {{"rank", set.format()}, {"children", c}};
        if (children.memory)
            entry["memory"] = children.memory;
        lite.push_back(std::move(entry));
    }
    nlohmann::json execution = {{"R_lite", lite}, {"starttime", starttime}, {"expiration", expiration}};
    if (!nodelist.empty())
        execution["nodelist"] = nlohmann::json::array({nodelist.format()});
    if (!properties.empty()) {
        nlohmann::json props = nlohmann::json::object();
        for (const auto& [name, set] : properties)
            props[name] = set.format();
        execution["properties"] = props;
    }
    nlohmann::json r = {{"version", 1}, {"execution", execution}};
    if (scheduling)
        r["scheduling"] = *scheduling;
    return r;
}

Result<Rv1> Rv1::from_json(const nlohmann::json& j) {
    if (!j.is_object())
        return bad("expected a JSON object");
    if (!j.contains("version") || j["version"] != 1)
        return bad("version: expected 1");
    if (!j.contains("execution") || !j["execution"].is_object())
        return bad("execution: expected an object");
    const auto& ex = j["execution"];
    if (!ex.contains("R_lite") || !ex["R_lite"].is_array())
        return bad("execution.R_lite: expected an array");
    Rv1 r;
    for (size_t i = 0; i < ex["R_lite"].size(); i++) {
        const auto& entry = ex["R_lite"][i];
        std::string path = fmt::format("execution.R_lite[{}]", i);
        if (!entry.is_object() || !entry.contains("rank") || !entry.contains("children") ||
            !entry["children"].is_object())
            return bad(path + ": expected {\"rank\": IDSET, \"children\": {...}}");
        auto ranks = idset_at(entry["rank"], path + ".rank");
        if (!ranks)
            return ranks.error();
        RankChildren children;
        for (const auto& [key, value] : entry["children"].items()) {
            auto set = idset_at(value, path + ".children." + key);
            if (!set)
                return set.error();
            if (key == "core")
                children.cores = *set;
            else if (key == "gpu")
                children.gpus = *set;
            else
                return bad(fmt::format("{}.children.{}: unknown resource type (expected core or gpu)", path, key));
        }
        if (entry.contains("memory")) {
            if (!entry["memory"].is_number_unsigned() || entry["memory"].get<uint64_t>() == 0)
                return bad(path + ".memory: expected bytes, a whole number above 0");
            children.memory = entry["memory"].get<uint64_t>();
        }
        if (ranks->count() > (1u << 20))
            return bad(path + ".rank: more than 1048576 ranks");
        for (uint32_t rank : ranks->ids()) {
            if (r.ranks.count(rank))
                return bad(fmt::format("{}.rank: rank {} appears twice", path, rank));
            r.ranks[rank] = children;
        }
    }
    if (ex.contains("nodelist")) {
        if (!ex["nodelist"].is_array())
            return bad("execution.nodelist: expected an array of hostlists");
        for (const auto& h : ex["nodelist"]) {
            if (!h.is_string())
                return bad("execution.nodelist: expected an array of hostlists");
            auto hosts = HostList::parse(h.get<std::string>());
            if (!hosts)
                return bad("execution.nodelist: " + hosts.error().message);
            r.nodelist.append(*hosts);
        }
        if (r.nodelist.size() != r.ranks.size())
            return bad(fmt::format("execution.nodelist has {} hosts for {} ranks", r.nodelist.size(), r.ranks.size()));
    }
    for (auto [key, field] : {std::pair{"starttime", &r.starttime}, std::pair{"expiration", &r.expiration}}) {
        if (ex.contains(key)) {
            if (!ex[key].is_number())
                return bad(fmt::format("execution.{}: expected a number", key));
            *field = ex[key].get<double>();
        }
    }
    if (ex.contains("properties")) {
        if (!ex["properties"].is_object())
            return bad("execution.properties: expected an object");
        for (const auto& [name, value] : ex["properties"].items()) {
            auto set = idset_at(value, "execution.properties." + name);
            if (!set)
                return set.error();
            r.properties[name] = *set;
        }
    }
    if (j.contains("scheduling"))
        r.scheduling = j["scheduling"];
    return r;
}

Result<Rv1> Rv1::parse(std::string_view text) {
    auto j = parse_json(text);
    if (!j)
        return bad(j.error().message);
    return from_json(*j);
}

}  // namespace banyan
