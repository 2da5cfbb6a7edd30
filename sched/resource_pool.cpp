#include "sched/resource_pool.hpp"

#include <algorithm>
#include <bit>

#include <fmt/format.h>

#include "core/byte_size.hpp"

namespace banyan {

ResourcePool::ResourcePool(const ResourceGraph& graph) {
    const auto& g = graph.graph();
    vertices_.reserve(graph.size());
    // Preorder numbering, children in ascending id order.
    struct Frame {
        ResourceGraph::Vertex source;
        uint32_t parent;
    };
    std::vector<Frame> todo;
    std::vector<std::pair<int64_t, ResourceGraph::Vertex>> kids;
    if (graph.root())
        todo.push_back({*graph.root(), kNoVertex});
    while (!todo.empty()) {
        Frame f = todo.back();
        todo.pop_back();
        const ResourceVertex& p = g[f.source];
        uint32_t index = static_cast<uint32_t>(vertices_.size());
        Vertex v;
        v.parent = f.parent;
        v.type = intern_type(graph.type(f.source));
        if (unit_bytes_.size() <= v.type) {
            unit_bytes_.resize(v.type + 1, 0);
            unit_bytes_[v.type] = bytes_per_unit(graph.unit(f.source));
        }
        v.basename = intern_string(graph.basename(f.source));
        std::string name = graph.name(f.source);
        if (name != fmt::format("{}{}", graph.basename(f.source), p.id))
            v.name = intern_string(name);
        v.id = p.id;
        v.size = p.size;
        v.status = p.status;
        v.rank = p.rank >= 0 || f.parent == kNoVertex ? p.rank : vertices_[f.parent].rank;
        if (graph.type(f.source) == "node" && p.rank >= 0)
            nodes_by_rank_[p.rank] = index;
        vertices_.push_back(v);
        for (const auto& prop : graph.properties(f.source))
            properties_[index].push_back(intern_string(prop));
        if (f.parent == kNoVertex)
            roots_.push_back(index);
        kids.clear();
        for (auto c : graph.children(f.source))
            kids.emplace_back(g[c].id, c);
        // graph order kept
        for (auto k = kids.rbegin(); k != kids.rend(); ++k)
            todo.push_back({k->second, index});
    }
    // Children lists: vertices in preorder visit a parent's children in id
    // order, so appending keeps each list sorted.
    std::vector<uint32_t> counts(vertices_.size() + 1, 0);
    for (const auto& v : vertices_)
        if (v.parent != kNoVertex)
            ++counts[v.parent];
    uint32_t offset = 0;
    for (size_t i = 0; i < vertices_.size(); ++i) {
        vertices_[i].children_begin = vertices_[i].children_end = offset;
        offset += counts[i];
    }
    child_list_.resize(offset);
    for (uint32_t i = 0; i < vertices_.size(); ++i) {
        uint32_t p = vertices_[i].parent;
        if (p == kNoVertex)
            continue;
        vertices_[i].position = vertices_[p].children_end - vertices_[p].children_begin;
        child_list_[vertices_[p].children_end++] = i;
    }
    for (uint32_t i = static_cast<uint32_t>(vertices_.size()); i-- > 0;) {
        auto& v = vertices_[i];
        v.subtree_end =
            v.children_end > v.children_begin ? vertices_[child_list_[v.children_end - 1]].subtree_end : i + 1;
    }
    build_aggregates();
}

void ResourcePool::build_aggregates() {
    // Which types each subtree holds, as a bitmask, bottom-up; then one
    // aggregate per type, totals summed bottom-up.
    std::vector<uint64_t> masks(vertices_.size(), 0);
    for (uint32_t i = size(); i-- > 0;) {
        masks[i] |= uint64_t{1} << vertices_[i].type;
        if (vertices_[i].parent != kNoVertex)
            masks[vertices_[i].parent] |= masks[i];
    }
    for (uint32_t i = 0; i < size(); ++i)
        if (!is_leaf(i))
            internal_types_ |= uint64_t{1} << vertices_[i].type;
    size_t count = 0;
    for (uint64_t m : masks)
        count += static_cast<size_t>(std::popcount(m));
    aggregates_.reserve(count);
    for (uint32_t i = 0; i < size(); ++i) {
        vertices_[i].aggregates_begin = static_cast<uint32_t>(aggregates_.size());
        for (uint64_t m = masks[i]; m; m &= m - 1)
            aggregates_.push_back(Aggregate{static_cast<TypeId>(std::countr_zero(m)), 0, 0, Planner{}});
        vertices_[i].aggregates_end = static_cast<uint32_t>(aggregates_.size());
    }
    for (uint32_t i = size(); i-- > 0;) {
        Aggregate* own = aggregate(i, vertices_[i].type);
        own->planner.set_total(own->planner.total() + vertices_[i].size);
        uint32_t p = vertices_[i].parent;
        if (p == kNoVertex)
            continue;
        for (uint32_t a = vertices_[i].aggregates_begin; a < vertices_[i].aggregates_end; ++a) {
            Aggregate* up = aggregate(p, aggregates_[a].type);
            up->planner.set_total(up->planner.total() + aggregates_[a].planner.total());
        }
    }
    for (uint32_t i = 0; i < size(); ++i) {
        auto kids = children(i);
        if (kids.size() < kBitmapFanout)
            continue;
        ChildBitmaps& maps = bitmaps_[i];
        for (uint32_t a = vertices_[i].aggregates_begin; a < vertices_[i].aggregates_end; ++a) {
            TypeId t = aggregates_[a].type;
            std::vector<uint64_t> bits((kids.size() + 63) / 64, 0);
            for (size_t k = 0; k < kids.size(); ++k)
                if (total(kids[k], t) > 0)
                    bits[k / 64] |= uint64_t{1} << (k % 64);
            maps.by_type.emplace_back(t, std::move(bits));
        }
    }
}

TypeId ResourcePool::intern_type(std::string_view name) {
    for (size_t i = 0; i < type_names_.size(); ++i)
        if (type_names_[i] == name)
            return static_cast<TypeId>(i);
    // Aggregates keep a 64-bit type mask; a graph with more types folds the
    // rest into the last one, which only weakens pruning for them.
    if (type_names_.size() == 63)
        return 63;
    type_names_.emplace_back(name);
    return static_cast<TypeId>(type_names_.size() - 1);
}

uint32_t ResourcePool::intern_string(std::string_view s) {
    auto it = string_ids_.find(s);
    if (it != string_ids_.end())
        return it->second;
    strings_.emplace_back(s);
    return string_ids_.emplace(std::string(s), static_cast<uint32_t>(strings_.size() - 1)).first->second;
}

std::optional<TypeId> ResourcePool::find_type(std::string_view name) const {
    for (size_t i = 0; i < type_names_.size(); ++i)
        if (type_names_[i] == name)
            return static_cast<TypeId>(i);
    return std::nullopt;
}

std::string ResourcePool::name(uint32_t v) const {
    const Vertex& x = vertices_[v];
    return x.name ? strings_[x.name] : fmt::format("{}{}", strings_[x.basename], x.id);
}

int ResourcePool::depth(uint32_t v) const {
    int d = 1;
    for (uint32_t p = parent(v); p != kNoVertex; p = parent(p))
        ++d;
    return d;
}

std::optional<uint32_t> ResourcePool::node_of_rank(int32_t rank) const {
    auto it = nodes_by_rank_.find(rank);
    return it == nodes_by_rank_.end() ? std::nullopt : std::optional(it->second);
}

std::span<const uint32_t> ResourcePool::children(uint32_t v) const {
    const Vertex& x = vertices_[v];
    return {child_list_.data() + x.children_begin, x.children_end - x.children_begin};
}

std::span<const uint64_t> ResourcePool::free_children(uint32_t v, TypeId t) const {
    auto it = bitmaps_.find(v);
    if (it == bitmaps_.end())
        return {};
    for (const auto& [type, bits] : it->second.by_type)
        if (type == t)
            return bits;
    return {};
}

const ResourcePool::Aggregate* ResourcePool::aggregate(uint32_t v, TypeId t) const {
    const Vertex& x = vertices_[v];
    for (uint32_t a = x.aggregates_begin; a < x.aggregates_end; ++a)
        if (aggregates_[a].type == t)
            return &aggregates_[a];
    return nullptr;
}

ResourcePool::Aggregate* ResourcePool::aggregate(uint32_t v, TypeId t) {
    return const_cast<Aggregate*>(std::as_const(*this).aggregate(v, t));
}

int64_t ResourcePool::total(uint32_t v, TypeId t) const {
    const Aggregate* a = aggregate(v, t);
    return a ? a->planner.total() : 0;
}

int64_t ResourcePool::avail(uint32_t v, TypeId t, int64_t start, int64_t end, bool ignore_use) const {
    const Aggregate* a = aggregate(v, t);
    if (!a)
        return 0;
    return ignore_use ? a->planner.total() : a->planner.avail(start, end);
}

int64_t ResourcePool::free_now(uint32_t v, TypeId t) const {
    const Aggregate* a = aggregate(v, t);
    return a ? a->planner.total() - a->now_used : 0;
}

bool ResourcePool::has_property(uint32_t v, std::string_view name) const {
    auto props = properties_.find(v);
    if (props == properties_.end())
        return false;
    auto id = string_ids_.find(name);
    return id != string_ids_.end() &&
           std::find(props->second.begin(), props->second.end(), id->second) != props->second.end();
}

std::vector<std::string> ResourcePool::properties(uint32_t v) const {
    std::vector<std::string> out;
    if (auto props = properties_.find(v); props != properties_.end())
        for (uint32_t id : props->second)
            out.push_back(strings_[id]);
    return out;
}

std::vector<std::string> ResourcePool::property_names() const {
    std::vector<std::string> out;
    for (const auto& [v, ids] : properties_)
        for (uint32_t id : ids)
            out.push_back(strings_[id]);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

int64_t ResourcePool::unmatched_now(uint32_t v, TypeId t) const {
    const Aggregate* a = aggregate(v, t);
    return a ? a->planner.total() - a->matched_now : 0;
}

bool ResourcePool::subtree_idle(uint32_t v, int64_t start, int64_t end) const {
    const Vertex& x = vertices_[v];
    for (uint32_t a = x.aggregates_begin; a < x.aggregates_end; ++a)
        if (aggregates_[a].planner.max_used(start, end) != 0)
            return false;
    return true;
}

void ResourcePool::set_free_bit(uint32_t v, TypeId t, bool free) {
    uint32_t p = parent(v);
    if (p == kNoVertex)
        return;
    auto it = bitmaps_.find(p);
    if (it == bitmaps_.end())
        return;
    for (auto& [type, bits] : it->second.by_type) {
        if (type != t)
            continue;
        uint32_t k = position(v);
        if (free)
            bits[k / 64] |= uint64_t{1} << (k % 64);
        else
            bits[k / 64] &= ~(uint64_t{1} << (k % 64));
    }
}

void ResourcePool::plan_whole(uint32_t v, int64_t start, int64_t end, int sign) {
    for (uint32_t u = v; u < subtree_end(v); ++u)
        for (uint32_t a = vertices_[u].aggregates_begin; a < vertices_[u].aggregates_end; ++a)
            aggregates_[a].planner.add(start, end, sign * aggregates_[a].planner.total());
    for (uint32_t a = vertices_[v].aggregates_begin; a < vertices_[v].aggregates_end; ++a) {
        TypeId t = aggregates_[a].type;
        int64_t amount = sign * aggregates_[a].planner.total();
        for (uint32_t p = parent(v); p != kNoVertex; p = parent(p))
            aggregate(p, t)->planner.add(start, end, amount);
    }
}

void ResourcePool::apply(std::span<const Claim> claims, int64_t start, int64_t end, bool allocation, int sign) {
    for (const Claim& c : claims) {
        if (!c.consumes)
            continue;
        TypeId t = type(c.vertex);
        for (uint32_t a = c.vertex; a != kNoVertex; a = parent(a)) {
            Aggregate* agg = aggregate(a, t);
            agg->planner.add(start, end, sign * c.amount);
            if (!allocation)
                continue;
            bool was_free = agg->planner.total() > agg->now_used;
            agg->now_used += sign * c.amount;
            if (c.shown)
                agg->matched_now += sign * c.amount;
            bool is_free = agg->planner.total() > agg->now_used;
            if (was_free != is_free)
                set_free_bit(a, t, is_free);
        }
    }
}

}  // namespace banyan
