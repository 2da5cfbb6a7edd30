#include "resource/grug.hpp"

#include <map>
#include <sstream>

#include <fmt/format.h>
#include <boost/property_tree/ptree.hpp>
#include <boost/property_tree/xml_parser.hpp>

namespace banyan {
namespace {

using boost::property_tree::ptree;

struct Recipe {
    std::map<std::string, std::string> data;  // key id -> value (defaults filled in)
};
struct RecipeEdge {
    std::string source, target;
    std::map<std::string, std::string> data;
};

class Generator {
  public:
    Generator(ResourceGraph& graph, const std::map<std::string, Recipe>& vertices,
              const std::multimap<std::string, RecipeEdge>& edges)
        : graph_(graph), vertices_(vertices), edges_(edges) {}

    // Creates the instances under `instance` (of recipe `recipe`), depth first.
    Result<void> expand(const std::string& recipe, ResourceGraph::Vertex instance,
                        std::vector<ResourceGraph::Vertex>& ancestors) {
        auto [first, last] = edges_.equal_range(recipe);
        for (auto it = first; it != last; ++it) {
            const RecipeEdge& e = it->second;
            if (e.data.at("e_subsystem") != "containment" || e.data.at("gen_method") != "MULTIPLY")
                continue;
            auto target = vertices_.find(e.target);
            if (target == vertices_.end())
                return make_error(EINVAL, fmt::format("GRUG: edge {} -> {}: no such vertex", e.source, e.target));
            auto scale = number(e.data.at("multi_scale"));
            auto scope = number(e.data.at("id_scope"));
            auto start = number(e.data.at("id_start"));
            auto stride = number(e.data.at("id_stride"));
            if (!scale || !scope || !start || !stride || *scale < 0 || *scope < 0)
                return make_error(EINVAL, fmt::format("GRUG: edge {} -> {}: bad number", e.source, e.target));
            // Ids count per instance `scope` levels above the new vertex's parent.
            size_t depth = ancestors.size();  // `instance` is ancestors.back()
            ResourceGraph::Vertex scope_owner =
                static_cast<size_t>(*scope) < depth ? ancestors[depth - 1 - static_cast<size_t>(*scope)] : ancestors[0];
            const auto& t = target->second.data;
            for (int64_t k = 0; k < *scale; k++) {
                int64_t& counter = counters_[{scope_owner, e.target}];
                int64_t id = *start + counter++ * *stride;
                auto size = number(t.at("size"));
                if (!size)
                    return make_error(EINVAL, fmt::format("GRUG: vertex {}: bad size", e.target));
                int32_t rank = t.at("type") == "node" ? next_rank_++ : -1;
                auto child = graph_.add_vertex(instance, t.at("type"), t.at("basename"), id, rank, *size, t.at("unit"));
                ancestors.push_back(child);
                auto r = expand(e.target, child, ancestors);
                ancestors.pop_back();
                if (!r)
                    return r;
            }
        }
        return {};
    }

  private:
    static Result<int64_t> number(const std::string& text) {
        try {
            size_t used = 0;
            int64_t v = std::stoll(text, &used);
            if (used == text.size())
                return v;
        } catch (const std::exception&) {
        }
        return make_error(EINVAL, "not a number");
    }

    ResourceGraph& graph_;
    const std::map<std::string, Recipe>& vertices_;
    const std::multimap<std::string, RecipeEdge>& edges_;
    std::map<std::pair<ResourceGraph::Vertex, std::string>, int64_t> counters_;
    int32_t next_rank_ = 0;
};

}  // namespace

Result<ResourceGraph> read_grug(std::string_view xml) {
    ptree doc;
    try {
        std::istringstream in{std::string(xml)};
        boost::property_tree::read_xml(in, doc);
    } catch (const std::exception& e) {
        return make_error(EINVAL, fmt::format("GRUG: not valid XML: {}", e.what()));
    }
    auto root = doc.get_child_optional("graphml");
    if (!root)
        return make_error(EINVAL, "GRUG: no <graphml> element");
    std::map<std::string, std::string> node_defaults = {
        {"root", "0"}, {"size", "1"}, {"unit", ""}, {"subsystem", "containment"}};
    std::map<std::string, std::string> edge_defaults = {
        {"e_subsystem", "containment"}, {"id_scope", "0"},   {"id_start", "0"}, {"id_stride", "1"},
        {"gen_method", "MULTIPLY"},     {"multi_scale", "1"}};
    for (const auto& [tag, key] : *root) {
        if (tag != "key")
            continue;
        std::string id = key.get("<xmlattr>.id", "");
        std::string target = key.get("<xmlattr>.for", "");
        if (auto def = key.get_optional<std::string>("default"))
            (target == "edge" ? edge_defaults : node_defaults)[id] = *def;
    }
    auto graph_el = root->get_child_optional("graph");
    if (!graph_el)
        return make_error(EINVAL, "GRUG: no <graph> element");
    std::map<std::string, Recipe> vertices;
    std::multimap<std::string, RecipeEdge> edges;
    std::string root_recipe;
    auto read_data = [](const ptree& el, std::map<std::string, std::string> data) {
        for (const auto& [tag, d] : el)
            if (tag == "data")
                data[d.get("<xmlattr>.key", "")] = d.get_value<std::string>();
        return data;
    };
    for (const auto& [tag, el] : *graph_el) {
        if (tag == "node") {
            std::string id = el.get("<xmlattr>.id", "");
            Recipe r{read_data(el, node_defaults)};
            if (!r.data.count("type") || !r.data.count("basename"))
                return make_error(EINVAL, fmt::format("GRUG: vertex '{}' needs type and basename", id));
            if (r.data["root"] == "1" && r.data["subsystem"] == "containment")
                root_recipe = id;
            vertices[id] = std::move(r);
        } else if (tag == "edge") {
            RecipeEdge e{el.get("<xmlattr>.source", ""), el.get("<xmlattr>.target", ""), read_data(el, edge_defaults)};
            edges.emplace(e.source, std::move(e));
        }
    }
    if (root_recipe.empty())
        return make_error(EINVAL, "GRUG: no containment root vertex (root = 1)");
    const auto& r = vertices[root_recipe].data;
    ResourceGraph graph{ResourceGraph::Empty{}};
    auto top = graph.add_vertex(std::nullopt, r.at("type"), r.at("basename"), 0, -1, 1, r.at("unit"));
    Generator gen(graph, vertices, edges);
    std::vector<ResourceGraph::Vertex> ancestors{top};
    if (auto result = gen.expand(root_recipe, top, ancestors); !result)
        return result.error();
    return graph;
}

}  // namespace banyan
