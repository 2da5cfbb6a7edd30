#include "sched/node_eligibility.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace banyan {

NodeEligibility::NodeEligibility(const ResourcePool& pool) : pool_(pool) {}

void NodeEligibility::begin(const Constraint* constraint) {
    constraint_ = constraint;
    current_ = nullptr;
}

void NodeEligibility::clear() {
    cache_.clear();
    current_ = nullptr;
}

const std::vector<uint64_t>* NodeEligibility::children(uint32_t v) {
    if (!constraint_)
        return nullptr;
    if (!current_)
        current_ = &bitmaps_for(*constraint_);
    auto mask = current_->find(v);
    return mask == current_->end() ? nullptr : &mask->second;
}

const NodeEligibility::Bitmaps& NodeEligibility::bitmaps_for(const Constraint& constraint) {
    std::string key = constraint.to_json().dump();
    if (auto it = cache_.find(key); it != cache_.end())
        return it->second;
    // Which vertices above the nodes have a node below them that meets it.
    // Below a node nothing is filtered: the node was checked on the way in.
    // Only the nodes and their ancestors are read, not the whole graph.
    if (cache_.size() >= 256)
        cache_.clear();  // current_ is set from the result, after this
    std::optional<TypeId> node_type = pool_.find_type("node");
    constexpr uint8_t kSeen = 1, kMeets = 2;
    std::vector<uint8_t> flags(pool_.size(), 0);
    std::vector<uint32_t> above;
    for (const auto& [rank, node] : pool_.nodes_by_rank()) {
        bool meets = node_meets(node, constraint);
        flags[node] = meets ? kMeets : 0;
        for (uint32_t a = pool_.parent(node); a != kNoVertex; a = pool_.parent(a)) {
            bool seen = flags[a] & kSeen;
            if (seen && (!meets || (flags[a] & kMeets)))
                break;  // its ancestors are seen (and marked) already
            if (!seen)
                above.push_back(a);
            flags[a] |= kSeen | (meets ? kMeets : 0);
        }
    }
    Bitmaps masks;
    // A node without a rank is not in nodes_by_rank: no masks then.
    int64_t all_nodes = 0;
    for (uint32_t r : pool_.roots())
        all_nodes += node_type ? pool_.total(r, *node_type) : 0;
    if (all_nodes != static_cast<int64_t>(pool_.nodes_by_rank().size()))
        above.clear();
    for (uint32_t u : above) {
        auto kids = pool_.children(u);
        if (kids.size() < ResourcePool::kBitmapFanout)
            continue;
        std::vector<uint64_t> bits((kids.size() + 63) / 64, 0);
        // A child with no node below it is not the constraint's to judge.
        for (size_t i = 0; i < kids.size(); ++i) {
            uint32_t k = kids[i];
            bool is_node = pool_.type(k) == *node_type;
            if ((flags[k] & kMeets) || (!is_node && !(flags[k] & kSeen)))
                bits[i / 64] |= uint64_t{1} << (i % 64);
        }
        masks.emplace(u, std::move(bits));
    }
    return cache_.emplace(std::move(key), std::move(masks)).first->second;
}

bool NodeEligibility::node_meets(uint32_t node, const Constraint& c) const {
    // Name and rank are read only for terms that need them: this runs per
    // node, and on a large graph each read of a vertex is a cache miss.
    return c.match(c.uses_hosts() ? pool_.name(node) : std::string(), c.uses_ranks() ? pool_.rank(node) : -1,
                   [&](std::string_view name) { return pool_.has_property(node, name); });
}

std::string NodeEligibility::unsatisfiable_reason() const {
    if (!constraint_)
        return "unsatisfiable: the resource graph can never hold this request";
    // Name the part of the constraint that no node meets, if there is one.
    auto some_node = [&](const Constraint& c) {
        return std::any_of(pool_.nodes_by_rank().begin(), pool_.nodes_by_rank().end(),
                           [&](const auto& rank_vertex) { return node_meets(rank_vertex.second, c); });
    };
    if (auto term = constraint_->unmet_term(some_node)) {
        auto known = pool_.property_names();
        for (const auto& name : constraint_->property_names())
            if ((*term == name) && !std::binary_search(known.begin(), known.end(), name))
                return fmt::format("unsatisfiable: no node has the property '{}'", name);
        return fmt::format("unsatisfiable: no node satisfies '{}'", *term);
    }
    size_t nodes = 0;
    for (const auto& [rank, v] : pool_.nodes_by_rank())
        nodes += node_meets(v, *constraint_);
    return fmt::format("unsatisfiable: the {} node{} that satisfy '{}' can never hold this request", nodes,
                       nodes == 1 ? "" : "s", constraint_->describe());
}

}  // namespace banyan
