// HostList: an ordered list of host names with the compressed text form
// admins already use: "node[1-4,7],login0". Order matters (a broker's rank
// is the index of its host), so parse and format preserve it; duplicates
// are kept. Zero padding is preserved: "n[01-10]" is n01..n10. Several
// bracket groups in one name expand as a Cartesian product
// ("r[1-2]n[1-2]" is r1n1,r1n2,r2n1,r2n2).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"

namespace banyan {

class HostList {
  public:
    static constexpr size_t kMaxHosts = size_t{1} << 20;

    HostList() = default;
    HostList(std::initializer_list<std::string> hosts) : hosts_(hosts) {}

    // Error names the bad part: an empty name, unbalanced or nested
    // brackets, a bad range, a character not allowed in a host name, or
    // more than `max_hosts` hosts (at most kMaxHosts).
    static Result<HostList> parse(std::string_view text, size_t max_hosts = kMaxHosts);

    // Canonical compressed form: runs of hosts that differ only in a
    // trailing number become one bracket group, in the original order.
    std::string format() const;

    size_t size() const { return hosts_.size(); }
    bool empty() const { return hosts_.empty(); }
    const std::string& operator[](size_t i) const { return hosts_[i]; }
    auto begin() const { return hosts_.begin(); }
    auto end() const { return hosts_.end(); }

    // Index of the first occurrence of `host`, or nullopt.
    std::optional<size_t> find(std::string_view host) const;
    // Precondition for both: the result stays within kMaxHosts.
    void append(std::string host) { hosts_.push_back(std::move(host)); }
    void append(const HostList& other) { hosts_.insert(hosts_.end(), other.begin(), other.end()); }

    bool operator==(const HostList&) const = default;

  private:
    std::vector<std::string> hosts_;
};

}  // namespace banyan
