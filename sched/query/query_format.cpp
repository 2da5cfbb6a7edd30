#include "sched/query/query_format.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace banyan {

Result<QueryFormat> query_format_from_name(std::string_view name) {
    if (name == "simple")
        return QueryFormat::simple;
    if (name == "pretty_simple")
        return QueryFormat::pretty_simple;
    if (name == "jgf")
        return QueryFormat::jgf;
    if (name == "rv1")
        return QueryFormat::rv1;
    if (name == "rv1_nosched")
        return QueryFormat::rv1_nosched;
    return make_error(EINVAL,
                      fmt::format("unknown match format '{}' (known: simple, pretty_simple, jgf, rv1, rv1_nosched)", name));
}

namespace {

// Shown claims in preorder (vertex numbers are preorder), one per vertex.
std::vector<Claim> shown_in_preorder(std::span<const Claim> claims) {
    std::vector<Claim> out;
    for (const Claim& c : claims)
        if (c.shown)
            out.push_back(c);
    std::sort(out.begin(), out.end(), [](const Claim& a, const Claim& b) { return a.vertex < b.vertex; });
    return out;
}

std::string vertex_line(const ResourcePool& pool, const Claim& c, bool pretty) {
    std::string dashes;
    for (int d = pool.depth(c.vertex); d > 0; --d)
        dashes += "---";
    const char* mode = pretty ? (c.exclusive ? "exclusive" : "shared") : (c.exclusive ? "x" : "s");
    return fmt::format("      {}{}[{}:{}]\n", dashes, pool.name(c.vertex), c.amount, mode);
}

std::string vertex_path(const ResourcePool& pool, uint32_t v) {
    std::string path;
    for (uint32_t p = v; p != kNoVertex; p = pool.parent(p))
        path = "/" + pool.name(p) + path;
    return path;
}

}  // namespace

nlohmann::json claims_to_jgf(const ResourcePool& pool, std::span<const Claim> claims) {
    nlohmann::json nodes = nlohmann::json::array(), edges = nlohmann::json::array();
    std::vector<Claim> shown = shown_in_preorder(claims);
    std::vector<uint32_t> in_graph;
    for (const Claim& c : shown)
        in_graph.push_back(c.vertex);
    for (const Claim& c : shown) {
        uint32_t v = c.vertex;
        nodes.push_back({{"id", std::to_string(v)},
                         {"metadata",
                          {{"type", pool.type_name(pool.type(v))},
                           {"name", pool.name(v)},
                           {"id", pool.id(v)},
                           {"uniq_id", v},
                           {"rank", pool.rank(v)},
                           {"exclusive", c.exclusive},
                           {"size", c.amount},
                           {"paths", {{"containment", vertex_path(pool, v)}}}}}});
        uint32_t p = pool.parent(v);
        if (p != kNoVertex && std::binary_search(in_graph.begin(), in_graph.end(), p))
            edges.push_back({{"source", std::to_string(p)},
                             {"target", std::to_string(v)},
                             {"metadata", {{"name", {{"containment", "contains"}}}}}});
    }
    return {{"graph", {{"nodes", nodes}, {"edges", edges}}}};
}

std::string format_claims(const Matcher& matcher, std::span<const Claim> claims, int64_t start, int64_t end,
                          QueryFormat format) {
    const ResourcePool& pool = matcher.pool();
    switch (format) {
    case QueryFormat::simple:
    case QueryFormat::pretty_simple: {
        // Fluxion's writers take the vertices in postorder, as its walk
        // leaves each subtree; pretty_simple puts each at the front (its
        // pretty_sim writer's push_front): the postorder reversed.
        std::vector<Claim> postorder;
        std::vector<Claim> open;
        for (const Claim& c : shown_in_preorder(claims)) {
            while (!open.empty() && c.vertex >= pool.subtree_end(open.back().vertex)) {
                postorder.push_back(open.back());
                open.pop_back();
            }
            open.push_back(c);
        }
        postorder.insert(postorder.end(), open.rbegin(), open.rend());
        bool pretty = format == QueryFormat::pretty_simple;
        if (pretty)
            std::reverse(postorder.begin(), postorder.end());
        std::string out;
        for (const Claim& c : postorder)
            out += vertex_line(pool, c, pretty);
        return out;
    }
    case QueryFormat::jgf:
        return claims_to_jgf(pool, claims).dump() + "\n";
    case QueryFormat::rv1:
    case QueryFormat::rv1_nosched: {
        Rv1 r = matcher.to_rv1(claims, start, end);
        if (format == QueryFormat::rv1)
            r.scheduling = claims_to_jgf(pool, claims);
        return r.to_json().dump() + "\n";
    }
    }
    return {};
}

}  // namespace banyan
