#include "resource/node.hpp"

#include <cctype>

#include <fmt/format.h>

namespace banyan {

Result<void> check_property_name(std::string_view name) {
    if (name.empty())
        return make_error(EINVAL, "a property name is empty");
    if (name.front() == '^' || name.front() == '-')
        return make_error(EINVAL, fmt::format("property '{}': a name cannot start with {} ({} negates)", name,
                                              name.front(), name.front()));
    for (char c : name) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
            return make_error(EINVAL, "a property name cannot hold a control character");
        if (std::isspace(static_cast<unsigned char>(c)) != 0 ||
            std::string_view(",()\"'").find(c) != std::string_view::npos)
            return make_error(EINVAL, fmt::format("property '{}': '{}' is not allowed in a name", name, c));
    }
    return {};
}

IdSet NodeDescription::cores() const {
    IdSet all;
    for (const auto& s : sockets)
        all = all.union_with(s.cores);
    return all;
}

IdSet NodeDescription::gpus() const {
    IdSet all;
    for (const auto& s : sockets)
        all = all.union_with(s.gpus);
    return all;
}

uint64_t NodeDescription::memory() const {
    uint64_t total = 0;
    for (const auto& s : sockets)
        total += s.memory;
    return total;
}

nlohmann::json NodeDescription::to_json() const {
    nlohmann::json socks = nlohmann::json::array();
    for (const auto& s : sockets)
        socks.push_back({{"cores", s.cores.format()}, {"gpus", s.gpus.format()}, {"memory", s.memory}});
    nlohmann::json j = {{"rank", rank}, {"hostname", hostname}, {"sockets", socks}};
    if (!properties.empty())
        j["properties"] = properties;
    return j;
}

Result<NodeDescription> NodeDescription::from_json(const nlohmann::json& j) {
    auto bad = [](std::string what) { return make_error(EPROTO, "node description: " + what); };
    if (!j.is_object())
        return bad("not an object");
    NodeDescription n;
    if (!j.contains("rank") || !j["rank"].is_number_unsigned())
        return bad("rank must be a non-negative integer");
    n.rank = j["rank"].get<uint32_t>();
    if (!j.contains("hostname") || !j["hostname"].is_string() || j["hostname"].get<std::string>().empty())
        return bad("hostname must be a non-empty string");
    n.hostname = j["hostname"].get<std::string>();
    if (!j.contains("sockets") || !j["sockets"].is_array())
        return bad("sockets must be an array");
    size_t i = 0;
    for (const auto& s : j["sockets"]) {
        SocketDescription sock;
        for (auto [key, set] : {std::pair{"cores", &sock.cores}, std::pair{"gpus", &sock.gpus}}) {
            if (!s.is_object() || !s.contains(key) || !s[key].is_string())
                return bad(fmt::format("sockets[{}].{} must be an idset string", i, key));
            auto parsed = IdSet::parse(s[key].get<std::string>());
            if (!parsed)
                return bad(fmt::format("sockets[{}].{}: {}", i, key, parsed.error().message));
            *set = std::move(*parsed);
        }
        if (!s.contains("memory") || !s["memory"].is_number_unsigned())
            return bad(fmt::format("sockets[{}].memory must be a byte count", i));
        sock.memory = s["memory"].get<uint64_t>();
        n.sockets.push_back(std::move(sock));
        i++;
    }
    if (j.contains("properties")) {
        if (!j["properties"].is_array())
            return bad("properties must be an array of names");
        for (size_t k = 0; k < j["properties"].size(); ++k) {
            const auto& name = j["properties"][k];
            if (!name.is_string())
                return bad(fmt::format("properties[{}] must be a string", k));
            if (auto ok = check_property_name(name.get<std::string>()); !ok)
                return bad(fmt::format("properties[{}]: {}", k, ok.error().message));
            n.properties.push_back(name.get<std::string>());
        }
    }
    return n;
}

}  // namespace banyan
