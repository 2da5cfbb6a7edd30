#include "core/tree.hpp"

namespace banyan {

std::optional<uint32_t> TreeShape::parent(uint32_t rank) const {
    if (rank == 0 || rank >= size_)
        return std::nullopt;
    return fanout_ == 0 ? 0 : (rank - 1) / fanout_;
}

std::vector<uint32_t> TreeShape::children(uint32_t rank) const {
    std::vector<uint32_t> out;
    if (fanout_ == 0) {
        if (rank == 0)
            for (uint32_t r = 1; r < size_; r++)
                out.push_back(r);
        return out;
    }
    for (uint64_t r = uint64_t{rank} * fanout_ + 1; r <= uint64_t{rank} * fanout_ + fanout_ && r < size_; r++)
        out.push_back(static_cast<uint32_t>(r));
    return out;
}

std::optional<uint32_t> TreeShape::child_toward(uint32_t rank, uint32_t target) const {
    if (target >= size_ || target == rank)
        return std::nullopt;
    uint32_t cur = target;
    for (auto p = parent(cur); p; p = parent(cur)) {
        if (*p == rank)
            return cur;
        cur = *p;
    }
    return std::nullopt;
}

std::vector<uint32_t> TreeShape::descendants(uint32_t rank) const {
    std::vector<uint32_t> out;
    std::vector<uint32_t> todo = children(rank);
    while (!todo.empty()) {
        uint32_t r = todo.back();
        todo.pop_back();
        out.push_back(r);
        for (uint32_t c : children(r))
            todo.push_back(c);
    }
    return out;
}

uint32_t TreeShape::depth(uint32_t rank) const {
    uint32_t d = 0;
    for (auto p = parent(rank); p; p = parent(*p))
        d++;
    return d;
}

}  // namespace banyan
