// ResourceGraph <-> JSON Graph Format, as Fluxion reads and writes it
// (doc/spec/resources.md section 6).
#include <fmt/format.h>

#include "core/json_field.hpp"
#include "resource/graph.hpp"
#include "resource/node.hpp"

namespace banyan {

nlohmann::json ResourceGraph::to_jgf() const {
    nlohmann::json nodes = nlohmann::json::array();
    nlohmann::json edges = nlohmann::json::array();
    std::vector<std::string> paths(size());
    for (Vertex v = 0; v < size(); v++) {
        auto p = parent(v);
        // Parents usually come first, so their path is known; else walk up.
        paths[v] = (p && *p < v) ? paths[*p] + "/" + name(v) : p ? path(v) : "/" + name(v);
        const ResourceVertex& r = (*g_)[v];
        nodes.push_back({{"id", std::to_string(v)},
                         {"metadata",
                          {{"type", type(v)},
                           {"basename", basename(v)},
                           {"name", name(v)},
                           {"id", r.id},
                           {"uniq_id", v},
                           {"rank", r.rank},
                           {"exclusive", r.exclusive},
                           {"unit", unit(v)},
                           {"size", r.size},
                           {"paths", {{"containment", paths[v]}}}}}});
        if (const auto& props = properties(v); !props.empty()) {
            // Fluxion's form: a name -> value map; Banyan's properties are names.
            nlohmann::json map = nlohmann::json::object();
            for (const auto& name : props)
                map[name] = "";
            nodes.back()["metadata"]["properties"] = std::move(map);
        }
        if (p)
            edges.push_back({{"source", std::to_string(*p)},
                             {"target", std::to_string(v)},
                             {"metadata", {{"subsystem", "containment"}}}});
    }
    return {{"graph", {{"nodes", nodes}, {"edges", edges}}}};
}

namespace {

// "node17" -> {"node", 17}; no trailing number -> {name, nullopt}.
std::pair<std::string, std::optional<int64_t>> split_name(const std::string& name) {
    size_t digits = name.find_last_not_of("0123456789") + 1;
    if (digits == name.size() || name.size() - digits > 12)
        return {name, std::nullopt};
    return {name.substr(0, digits), std::stoll(name.substr(digits))};
}

// The containment path's parent part: "/a/b/c" -> "/a/b".
std::string parent_path(const std::string& path) {
    size_t slash = path.rfind('/');
    return slash == std::string::npos || slash == 0 ? std::string() : path.substr(0, slash);
}

}  // namespace

Result<ResourceGraph> ResourceGraph::from_jgf(const nlohmann::json& document) {
    auto bad = [](std::string what) { return make_error(EINVAL, "JGF: " + what); };
    // R v1 carries its graph under "scheduling" (Fluxion's JGF+R form).
    const nlohmann::json& jgf =
        document.is_object() && document.contains("scheduling") ? document["scheduling"] : document;
    if (!jgf.is_object() || !jgf.contains("graph") || !jgf["graph"].is_object())
        return bad("expected {\"graph\": {\"nodes\": [...], \"edges\": [...]}}");
    const auto& graph = jgf["graph"];
    if (!graph.contains("nodes") || !graph["nodes"].is_array())
        return bad("graph.nodes: expected an array");
    ResourceGraph out{Empty{}};
    std::unordered_map<std::string, Vertex> by_id;
    std::vector<std::string> paths;
    size_t i = 0;
    for (const auto& n : graph["nodes"]) {
        std::string where = fmt::format("graph.nodes[{}]", i++);
        if (!n.is_object() || !n.contains("id") || !n["id"].is_string() || !n.contains("metadata") ||
            !n["metadata"].is_object())
            return bad(where + ": expected {\"id\": STRING, \"metadata\": {...}}");
        const auto& m = n["metadata"];
        if (!m.contains("type") || !m["type"].is_string())
            return bad(where + ".metadata.type: expected a string");
        if (by_id.count(n["id"].get<std::string>()))
            return bad(fmt::format("{}: id '{}' appears twice", where, n["id"].get<std::string>()));
        // Older graphs give only a name: basename and id come from it.
        std::string type = m["type"].get<std::string>();
        std::string meta = where + ".metadata";
        auto name = json_field<std::string>(m, "name", "", meta);
        if (!name)
            return bad(name.error().message);
        auto [base, number] = split_name(name->empty() ? type : *name);
        auto basename = json_field<std::string>(m, "basename", base, meta);
        auto id = json_field<int64_t>(m, "id", number.value_or(0), meta);
        auto rank = json_field<int32_t>(m, "rank", -1, meta);
        auto size = json_field<int64_t>(m, "size", 1, meta);
        auto unit = json_field<std::string>(m, "unit", "", meta);
        if (auto e = first_error(basename, id, rank, size, unit))
            return bad(e->message);
        Vertex v = out.add_vertex(std::nullopt, type, *basename, *id, *rank, *size, *unit, *name);
        auto exclusive = json_field(m, "exclusive", false, where + ".metadata");
        if (!exclusive)
            return bad(exclusive.error().message);
        (*out.g_)[v].exclusive = *exclusive;
        auto properties = json_field(m, "properties", nlohmann::json::object(), where + ".metadata");
        if (!properties)
            return bad(properties.error().message);
        for (const auto& [prop, value] : properties->items()) {
            if (auto ok = check_property_name(prop); !ok)
                return bad(fmt::format("{}.metadata.properties: {}", where, ok.error().message));
            // A property with a value is name=value, as discovery names them.
            if (!value.is_string())
                return bad(fmt::format("{}.metadata.properties.{}: expected a string", where, prop));
            std::string text = value.get<std::string>();
            out.add_property(v, text.empty() ? prop : prop + "=" + text);
        }
        by_id[n["id"].get<std::string>()] = v;
        auto containment = json_field(json_object_at(m, {"paths"}), "containment", std::string(), meta + ".paths");
        if (!containment)
            return bad(containment.error().message);
        paths.push_back(*containment);
    }
    i = 0;
    auto edges = json_field(graph, "edges", nlohmann::json::array(), "graph");
    if (!edges)
        return edges.error();
    for (const auto& e : *edges) {
        std::string where = fmt::format("graph.edges[{}]", i++);
        if (!e.is_object() || !e.contains("source") || !e.contains("target"))
            return bad(where + ": expected {\"source\", \"target\"}");
        auto meta = json_field(e, "metadata", nlohmann::json::object(), where);
        if (!meta)
            return meta.error();
        auto subsystem = json_field(*meta, "subsystem", std::string("containment"), where + ".metadata");
        auto relation = json_field(*meta, "relation", std::string("contains"), where + ".metadata");
        if (!subsystem || !relation)
            return (!subsystem ? subsystem : relation).error();
        if (*subsystem != "containment" || *relation != "contains")
            continue;  // other subsystems, and the reverse "in" edges
        auto src = by_id.find(e["source"].is_string() ? e["source"].get<std::string>() : e["source"].dump());
        auto dst = by_id.find(e["target"].is_string() ? e["target"].get<std::string>() : e["target"].dump());
        if (src == by_id.end() || dst == by_id.end())
            return bad(where + ": source or target names no node");
        // Some graphs list each edge both ways: the paths say which is down.
        const std::string& from = paths[src->second];
        const std::string& to = paths[dst->second];
        if (!from.empty() && !to.empty() && parent_path(to) != from)
            continue;
        if ((*out.g_)[dst->second].parent == ResourceVertex::kNoParent)
            out.add_edge(src->second, dst->second);
    }
    out.roots_.clear();
    for (Vertex v = 0; v < out.size(); v++)
        if (!out.parent(v))
            out.roots_.push_back(v);
    return out;
}

}  // namespace banyan
