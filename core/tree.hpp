// Tree shape of an instance: rank 0 is the root; with fanout k > 0 the
// parent of rank r is (r-1)/k; with fanout 0 the tree is flat (every rank
// is a child of 0). Shared by the broker (routing) and the CLI (drawing).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace banyan {

class TreeShape {
  public:
    TreeShape(uint32_t size, uint32_t fanout) : size_(size), fanout_(fanout) {}

    uint32_t size() const { return size_; }
    uint32_t fanout() const { return fanout_; }
    std::optional<uint32_t> parent(uint32_t rank) const;
    std::vector<uint32_t> children(uint32_t rank) const;
    // The child of `rank` whose subtree holds `target`, or nullopt when
    // `target` is not below `rank`.
    std::optional<uint32_t> child_toward(uint32_t rank, uint32_t target) const;
    // Every rank below `rank` (not itself).
    std::vector<uint32_t> descendants(uint32_t rank) const;
    uint32_t depth(uint32_t rank) const;  // root: 0

  private:
    uint32_t size_;
    uint32_t fanout_;
};

}  // namespace banyan
