// IdSet: a set of non-negative integer ids (broker ranks, core ids), held
// as sorted disjoint ranges so that "0-16383" costs one range, not 16384
// entries. Text form: "0-3,7,9-11"; an optional outer pair of brackets
// ("[0-3]") is accepted on input. Output is always the canonical form:
// ascending, ranges merged, no brackets.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"

namespace banyan {

class IdSet {
  public:
    static constexpr uint32_t kMaxId = 0xfffffffe;  // 0xffffffff means "any"

    struct Range {
        uint32_t first;
        uint32_t last;  // inclusive
        bool operator==(const Range&) const = default;
    };

    IdSet() = default;
    IdSet(std::initializer_list<uint32_t> ids);

    // Parses "0-3,7,9-11" (duplicates and overlaps merge; "" is the empty
    // set). Error names the bad element: a reversed range, a non-number,
    // an id above kMaxId, an empty element.
    static Result<IdSet> parse(std::string_view text);
    // Every id in [first, last].
    static IdSet range(uint32_t first, uint32_t last);

    std::string format() const;

    void insert(uint32_t id) { insert_range(id, id); }
    void insert_range(uint32_t first, uint32_t last);
    void erase(uint32_t id);
    bool contains(uint32_t id) const;
    uint64_t count() const;
    bool empty() const { return ranges_.empty(); }
    // Precondition: !empty().
    uint32_t first() const { return ranges_.front().first; }
    uint32_t last() const { return ranges_.back().last; }

    IdSet union_with(const IdSet& other) const;
    IdSet difference(const IdSet& other) const;
    IdSet intersection(const IdSet& other) const;

    const std::vector<Range>& ranges() const { return ranges_; }
    // Every id in ascending order. Expands the set: for small sets or loops
    // that visit each id anyway.
    std::vector<uint32_t> ids() const;

    template <class Fn>
    void for_each(Fn&& fn) const {
        for (const Range& r : ranges_)
            for (uint64_t id = r.first; id <= r.last; id++)
                fn(static_cast<uint32_t>(id));
    }

    bool operator==(const IdSet&) const = default;

  private:
    std::vector<Range> ranges_;  // sorted, disjoint, non-adjacent
};

// Parses a decimal id in 0..max with no sign, space or leading '+'; leading
// zeros allowed. Shared by IdSet and HostList.
Result<uint64_t> parse_decimal(std::string_view text, uint64_t max, std::string_view what);

}  // namespace banyan
