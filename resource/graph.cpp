#include "resource/graph.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace banyan {

ResourceGraph::ResourceGraph(std::string cluster_name) {
    add_vertex(std::nullopt, "cluster", cluster_name, 0);
}

uint32_t ResourceGraph::intern(std::string_view s) {
    auto it = string_ids_.find(s);
    if (it != string_ids_.end())
        return it->second;
    uint32_t id = static_cast<uint32_t>(strings_.size());
    strings_.emplace_back(s);
    string_ids_.emplace(std::string(s), id);
    return id;
}

ResourceGraph::Vertex ResourceGraph::add_vertex(std::optional<Vertex> parent, std::string_view type,
                                                std::string_view basename, int64_t id, int32_t rank, int64_t size,
                                                std::string_view unit, std::string_view name) {
    ResourceVertex props;
    props.type = intern(type);
    props.basename = intern(basename);
    props.id = id;
    props.rank = rank;
    props.size = size;
    props.unit = intern(unit);
    if (!name.empty() && name != fmt::format("{}{}", basename, id))
        props.name = intern(name);
    Vertex v = boost::add_vertex(props, *g_);
    if (parent)
        add_edge(*parent, v);
    else
        roots_.push_back(v);
    if (type == "node" && rank >= 0)
        nodes_[rank] = v;
    return v;
}

Result<ResourceGraph::Vertex> ResourceGraph::add_node(const NodeDescription& node) {
    if (nodes_.count(static_cast<int32_t>(node.rank)))
        return make_error(EEXIST, fmt::format("rank {} already has a node", node.rank));
    Vertex cluster = roots_.front();
    // "node17" becomes basename "node", id 17; a name without a trailing
    // number keeps basename "node" and the rank as id, and its own name.
    const std::string& host = node.hostname;
    size_t digits = host.find_last_not_of("0123456789") + 1;
    std::string base = "node";
    int64_t id = node.rank;
    if (digits > 0 && digits < host.size() && host.size() - digits <= 12) {
        base = host.substr(0, digits);
        id = std::stoll(host.substr(digits));
    }
    Vertex n = add_vertex(cluster, "node", base, id, static_cast<int32_t>(node.rank), 1, "", host);
    for (const auto& p : node.properties)
        add_property(n, p);
    int64_t socket_id = 0;
    for (const auto& s : node.sockets) {
        Vertex sock = add_vertex(n, "socket", "socket", socket_id++);
        s.cores.for_each([&](uint32_t c) { add_vertex(sock, "core", "core", c); });
        s.gpus.for_each([&](uint32_t gpu) { add_vertex(sock, "gpu", "gpu", gpu); });
        // In MiB: fine enough for --mem as users write it, and 64 bits of
        // them outlast any machine.
        if (int64_t mib = static_cast<int64_t>(s.memory >> 20); mib > 0)
            add_vertex(sock, "memory", "memory", socket_id - 1, -1, mib, "MiB");
    }
    return n;
}

Result<ResourceGraph> ResourceGraph::from_nodes(const std::vector<NodeDescription>& nodes, std::string cluster) {
    ResourceGraph graph(std::move(cluster));
    size_t vertices = 1;
    for (const auto& n : nodes)
        vertices += 1 + n.sockets.size() * 2 + n.cores().count() + n.gpus().count();
    graph.g_->m_vertices.reserve(vertices);
    for (const auto& n : nodes)
        if (auto r = graph.add_node(n); !r)
            return r.error();
    return graph;
}

std::string ResourceGraph::name(Vertex v) const {
    const ResourceVertex& p = (*g_)[v];
    if (p.name != 0)
        return strings_[p.name];
    return fmt::format("{}{}", strings_[p.basename], p.id);
}

const std::vector<std::string>& ResourceGraph::properties(Vertex v) const {
    static const std::vector<std::string> none;
    auto it = properties_.find(v);
    return it == properties_.end() ? none : it->second;
}

void ResourceGraph::add_property(Vertex v, const std::string& name) {
    auto& names = properties_[v];
    auto at = std::lower_bound(names.begin(), names.end(), name);
    if (at == names.end() || *at != name)
        names.insert(at, name);
}

std::vector<ResourceGraph::Vertex> ResourceGraph::children(Vertex v) const {
    std::vector<Vertex> out;
    for (auto [it, end] = boost::out_edges(v, *g_); it != end; ++it)
        out.push_back(boost::target(*it, *g_));
    return out;
}

void ResourceGraph::add_edge(Vertex parent, Vertex child) {
    boost::add_edge(parent, child, *g_);
    (*g_)[child].parent = static_cast<uint32_t>(parent);
}

std::optional<ResourceGraph::Vertex> ResourceGraph::parent(Vertex v) const {
    uint32_t p = (*g_)[v].parent;
    return p == ResourceVertex::kNoParent ? std::nullopt : std::optional<Vertex>(p);
}

std::string ResourceGraph::path(Vertex v) const {
    std::string out;
    for (std::optional<Vertex> cur = v; cur; cur = parent(*cur))
        out = "/" + name(*cur) + out;
    return out;
}

std::optional<ResourceGraph::Vertex> ResourceGraph::node_of_rank(int32_t rank) const {
    auto it = nodes_.find(rank);
    return it == nodes_.end() ? std::nullopt : std::optional(it->second);
}

RankChildren ResourceGraph::children_of_node(Vertex node) const {
    RankChildren out;
    std::vector<Vertex> todo = children(node);
    while (!todo.empty()) {
        Vertex v = todo.back();
        todo.pop_back();
        std::string_view t = type(v);
        if (t == "core")
            out.cores.insert(static_cast<uint32_t>((*g_)[v].id));
        else if (t == "gpu")
            out.gpus.insert(static_cast<uint32_t>((*g_)[v].id));
        for (Vertex c : children(v))
            todo.push_back(c);
    }
    return out;
}

Rv1 ResourceGraph::to_rv1(const std::vector<VertexStatus>& statuses) const {
    Rv1 r;
    for (const auto& [rank, v] : nodes_) {
        if (std::find(statuses.begin(), statuses.end(), (*g_)[v].status) == statuses.end())
            continue;
        r.ranks[static_cast<uint32_t>(rank)] = children_of_node(v);
        r.nodelist.append(name(v));
        for (const auto& p : properties(v))
            r.properties[p].insert(static_cast<uint32_t>(rank));
    }
    return r;
}

}  // namespace banyan
