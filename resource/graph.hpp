// ResourceGraph: the cluster as a graph of containment edges
// (doc/spec/resources.md section 4): cluster -> [rack ->] node -> socket ->
// core | gpu | memory. Vertices are compact (strings interned), so 16K nodes
// of 70 children each fit in ~100 MB. Nodes are found by rank.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <boost/graph/adjacency_list.hpp>
#include <nlohmann/json.hpp>

#include "core/hostlist.hpp"
#include "core/idset.hpp"
#include "core/result.hpp"
#include "resource/node.hpp"
#include "resource/rv1.hpp"

namespace banyan {

enum class VertexStatus : uint8_t { up, down, drained };

struct ResourceVertex {
    static constexpr uint32_t kNoParent = 0xffffffff;
    uint32_t parent = kNoParent;  // containment parent (a tree: one parent)
    uint32_t type = 0;            // interned strings
    uint32_t basename = 0;
    uint32_t name = 0;  // 0: basename + id
    uint32_t unit = 0;
    int64_t id = 0;
    int64_t size = 1;
    int32_t rank = -1;
    VertexStatus status = VertexStatus::up;
    bool exclusive = false;
};

class ResourceGraph {
  public:
    // Directed (children only): a parent index in each vertex replaces the
    // in-edge lists and global edge list of bidirectionalS, which cost
    // ~500 bytes a vertex.
    using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, ResourceVertex>;
    using Vertex = Graph::vertex_descriptor;

    // An empty graph with one cluster vertex named `cluster_name` + "0".
    explicit ResourceGraph(std::string cluster_name = "cluster");

    // Adds vertex under `parent` (none: a root). `name` empty: basename + id.
    Vertex add_vertex(std::optional<Vertex> parent, std::string_view type, std::string_view basename, int64_t id,
                      int32_t rank = -1, int64_t size = 1, std::string_view unit = "", std::string_view name = "");
    // Adds a node and its sockets, cores, gpus and memory under the cluster.
    // Error EEXIST when the rank already has a node.
    Result<Vertex> add_node(const NodeDescription& node);
    // Builds a graph from node descriptions (ranks must be distinct).
    static Result<ResourceGraph> from_nodes(const std::vector<NodeDescription>& nodes, std::string cluster = "cluster");
    // Adds a containment edge (the child had no parent).
    void add_edge(Vertex parent, Vertex child);

    size_t size() const { return boost::num_vertices(*g_); }
    // Containment is a forest: every vertex but a root has one parent edge.
    size_t edge_count() const { return size() - roots_.size(); }
    std::optional<Vertex> root() const { return roots_.empty() ? std::nullopt : std::optional(roots_.front()); }
    const ResourceVertex& operator[](Vertex v) const { return (*g_)[v]; }
    ResourceVertex& operator[](Vertex v) { return (*g_)[v]; }
    std::string_view type(Vertex v) const { return strings_[(*g_)[v].type]; }
    std::string_view basename(Vertex v) const { return strings_[(*g_)[v].basename]; }
    std::string_view unit(Vertex v) const { return strings_[(*g_)[v].unit]; }
    std::string name(Vertex v) const;
    // A node's properties (features jobs can require), sorted, unique.
    const std::vector<std::string>& properties(Vertex v) const;
    void add_property(Vertex v, const std::string& name);
    std::vector<Vertex> children(Vertex v) const;
    std::optional<Vertex> parent(Vertex v) const;
    // "/cluster0/node3/socket1".
    std::string path(Vertex v) const;

    // Node vertices by rank, ascending.
    const std::map<int32_t, Vertex>& nodes() const { return nodes_; }
    std::optional<Vertex> node_of_rank(int32_t rank) const;
    // Ids of the cores and gpus under a vertex, and its memory in size units.
    RankChildren children_of_node(Vertex node) const;
    // R v1 of the nodes whose status is in `statuses`, with hostnames.
    Rv1 to_rv1(const std::vector<VertexStatus>& statuses) const;

    // Fluxion's JSON Graph Format.
    nlohmann::json to_jgf() const;
    // Error names the JGF node or edge that is wrong.
    static Result<ResourceGraph> from_jgf(const nlohmann::json& jgf);

    const Graph& graph() const { return *g_; }

  private:
    struct Empty {};
    explicit ResourceGraph(Empty) {}
    uint32_t intern(std::string_view s);
    friend Result<ResourceGraph> read_grug(std::string_view xml);

    // Behind a pointer: Boost 1.74's adjacency_list has no real move
    // constructor, so moving a ResourceGraph would copy every vertex.
    std::unique_ptr<Graph> g_ = std::make_unique<Graph>();
    std::vector<std::string> strings_{""};
    struct StringHash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    std::unordered_map<std::string, uint32_t, StringHash, std::equal_to<>> string_ids_{{"", 0}};
    std::vector<Vertex> roots_;
    std::map<int32_t, Vertex> nodes_;
    std::map<Vertex, std::vector<std::string>> properties_;
};

}  // namespace banyan
