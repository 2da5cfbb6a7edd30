// ResourcePool: the scheduler's own copy of the resource graph, laid out for
// matching (doc/spec/sched.md section 2). Vertices are numbered in preorder,
// so a subtree is the index range [v, subtree_end(v)). Every vertex keeps,
// for each resource type in its subtree, an aggregate: the total amount, a
// planner of the amount in use over time, and the amount allocated now. The
// matcher prunes with the aggregates; high-fanout vertices also keep, per
// type, a bitmap of the children with something free now, so that filling a
// 10,000-node cluster does not rescan full nodes on every match.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "resource/graph.hpp"
#include "sched/planner.hpp"

namespace banyan {

using TypeId = uint16_t;
inline constexpr uint32_t kNoVertex = 0xffffffff;

// One vertex of a selection: what a job holds of it.
struct Claim {
    uint32_t vertex = kNoVertex;
    int64_t amount = 1;      // units of the vertex's size (1 for a core or a node)
    bool exclusive = false;  // printed x; nothing else may use it
    bool consumes = false;   // counts against the aggregates
    bool shown = true;       // part of the job's R and of the printed match
    bool asked = true;       // asked for, not held whole under an exclusive vertex (its memory is R's)
};

class ResourcePool {
  public:
    // Vertices with this many children or more keep free-children bitmaps
    // (below it a plain scan is as fast).
    static constexpr size_t kBitmapFanout = 32;

    // Copies `graph` (containment only). Vertices whose status is not up
    // are kept but never matched.
    explicit ResourcePool(const ResourceGraph& graph);

    uint32_t size() const { return static_cast<uint32_t>(vertices_.size()); }
    std::span<const uint32_t> roots() const { return roots_; }

    // Vertex properties.
    TypeId type(uint32_t v) const { return vertices_[v].type; }
    std::string_view type_name(TypeId t) const { return type_names_[t]; }
    std::optional<TypeId> find_type(std::string_view name) const;
    // Bytes in one unit of a type's size, from its vertices' unit (MiB for
    // memory in Banyan's graphs); 0 when that is not a unit of bytes.
    uint64_t unit_bytes(TypeId t) const { return t < unit_bytes_.size() ? unit_bytes_[t] : 0; }
    size_t type_count() const { return type_names_.size(); }
    std::string name(uint32_t v) const;
    int64_t id(uint32_t v) const { return vertices_[v].id; }
    int64_t vertex_size(uint32_t v) const { return vertices_[v].size; }
    int32_t rank(uint32_t v) const { return vertices_[v].rank; }  // the rank of the node at or above v; -1: none
    uint32_t parent(uint32_t v) const { return vertices_[v].parent; }
    uint32_t subtree_end(uint32_t v) const { return vertices_[v].subtree_end; }
    bool is_leaf(uint32_t v) const { return subtree_end(v) == v + 1; }
    // A type only leaves have (core, gpu, memory): requests for it are amounts.
    bool is_leaf_type(TypeId t) const { return !(internal_types_ >> t & 1); }
    int depth(uint32_t v) const;
    bool up(uint32_t v) const { return vertices_[v].status == VertexStatus::up; }
    VertexStatus status(uint32_t v) const { return vertices_[v].status; }
    void set_status(uint32_t v, VertexStatus status) { vertices_[v].status = status; }
    std::optional<uint32_t> node_of_rank(int32_t rank) const;
    // A node's properties (doc/spec/resources.md section 4).
    bool has_property(uint32_t v, std::string_view name) const;
    std::vector<std::string> properties(uint32_t v) const;
    // Every property any vertex has.
    std::vector<std::string> property_names() const;
    // Every node vertex with a rank, by rank.
    const std::unordered_map<int32_t, uint32_t>& nodes_by_rank() const { return nodes_by_rank_; }

    // Children in ascending id order (graph order breaks ties).
    std::span<const uint32_t> children(uint32_t v) const;
    // Position of v among its parent's children().
    uint32_t position(uint32_t v) const { return vertices_[v].position; }
    // Children-with-free-now bitmap of v for type t (position-indexed), or
    // empty when v keeps none.
    std::span<const uint64_t> free_children(uint32_t v, TypeId t) const;

    // Aggregates of the subtree of v for type t.
    int64_t total(uint32_t v, TypeId t) const;
    // Free during all of [start, end); `ignore_use`: the total.
    int64_t avail(uint32_t v, TypeId t, int64_t start, int64_t end, bool ignore_use = false) const;
    // Free now: total minus what allocations hold.
    int64_t free_now(uint32_t v, TypeId t) const;
    // Free now, minus only what allocations were matched to (shown claims),
    // not the rest of the vertices they hold whole: Fluxion's measure for
    // ordering children under `first`.
    int64_t unmatched_now(uint32_t v, TypeId t) const;
    // True when nothing in the subtree of v is in use during [start, end).
    bool subtree_idle(uint32_t v, int64_t start, int64_t end) const;

    // Adds (sign 1) or removes (sign -1) the consuming claims over
    // [start, end). `allocation`: they hold now, so free_now changes too.
    void apply(std::span<const Claim> claims, int64_t start, int64_t end, bool allocation, int sign);
    // Plans (sign 1) or unplans (sign -1) all of v's subtree as in use over
    // [start, end), in the planners only: each aggregate of the subtree by
    // its total, each of v's ancestors by v's total of the type, once (an
    // advance reservation of a node; as apply() of a claim on every vertex
    // of it, at a fraction of the planner updates).
    void plan_whole(uint32_t v, int64_t start, int64_t end, int sign);

  private:
    struct Vertex {
        uint32_t parent = kNoVertex;
        uint32_t subtree_end = 0;
        uint32_t children_begin = 0, children_end = 0;
        uint32_t aggregates_begin = 0, aggregates_end = 0;
        uint32_t position = 0;
        uint32_t basename = 0;
        uint32_t name = 0;  // 0: basename + id
        TypeId type = 0;
        VertexStatus status = VertexStatus::up;
        int32_t rank = -1;
        int64_t id = 0;
        int64_t size = 1;
    };
    struct Aggregate {
        TypeId type;
        int64_t now_used = 0;
        int64_t matched_now = 0;  // the part of now_used that shown claims hold
        Planner planner;
    };
    struct ChildBitmaps {
        std::vector<std::pair<TypeId, std::vector<uint64_t>>> by_type;
    };

    const Aggregate* aggregate(uint32_t v, TypeId t) const;
    Aggregate* aggregate(uint32_t v, TypeId t);
    TypeId intern_type(std::string_view name);
    uint32_t intern_string(std::string_view s);
    void build_aggregates();
    void set_free_bit(uint32_t v, TypeId t, bool free);

    std::vector<Vertex> vertices_;
    std::vector<uint32_t> child_list_;
    std::vector<Aggregate> aggregates_;
    std::vector<uint32_t> roots_;
    std::vector<std::string> type_names_;
    std::vector<uint64_t> unit_bytes_;  // by type: of its first vertex's unit
    std::vector<std::string> strings_{""};
    struct StringHash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    std::unordered_map<std::string, uint32_t, StringHash, std::equal_to<>> string_ids_{{"", 0}};
    std::unordered_map<uint32_t, ChildBitmaps> bitmaps_;
    std::unordered_map<int32_t, uint32_t> nodes_by_rank_;
    std::unordered_map<uint32_t, std::vector<uint32_t>> properties_;  // vertex -> interned names
    uint64_t internal_types_ = 0;
};

}  // namespace banyan
