// Banks, associations and fair-share (doc/spec/accounting.md §5, §6, §8):
// the table the accounting service keeps and the job manager is sent,
// and Fair Tree, which ranks the associations by it. No I/O here.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.hpp"

namespace banyan {

// accounting.md §8; 0: none.
struct BankLimits {
    int64_t max_running_jobs = 0;
    int64_t max_nodes = 0;
    int64_t max_cores = 0;
    int64_t max_gpus = 0;
    int64_t max_run_core_minutes = 0;
    int64_t max_submit_jobs = 0;

    static constexpr std::array<std::string_view, 6> kNames = {"max-running-jobs", "max-nodes",
                                                                "max-cores",        "max-gpus",
                                                                "max-run-core-minutes", "max-submit-jobs"};
    int64_t& at(size_t i);
    int64_t at(size_t i) const { return const_cast<BankLimits*>(this)->at(i); }
    nlohmann::json to_json() const;
    // Sets the limits `j` names, leaving the others. Error EINVAL naming
    // WHERE.KEY: an unknown key, or not an integer 0 to 10^12.
    Result<void> update(const nlohmann::json& j, std::string_view where);
    bool operator==(const BankLimits&) const = default;
};

struct Bank {
    std::string name;
    std::string parent;  // "": a top-level bank
    int64_t shares = 1;
    BankLimits limits;
    double usage = 0;  // decayed core-seconds of its subtree (set by fair_tree)
};

struct Association {
    uint32_t userid = 0;
    std::string bank;
    bool is_default = false;
    int64_t shares = 1;
    BankLimits limits;
    double usage = 0;      // decayed core-seconds
    double fairshare = 0;  // in [0, 1] (set by fair_tree)
};

constexpr int64_t kMaxShares = 1000000000;

// Letters, digits, '.', '_', '-'; 1 to 64. Error EINVAL naming it.
Result<void> check_bank_name(std::string_view name);

struct BankTable {
    std::vector<Bank> banks;
    std::vector<Association> users;

    bool empty() const { return banks.empty(); }
    const Bank* find_bank(std::string_view name) const;
    Bank* find_bank(std::string_view name);
    const Association* find_user(uint32_t userid, std::string_view bank) const;
    Association* find_user(uint32_t userid, std::string_view bank);
    // Would `bank` under `parent` close a cycle (parent is bank or below it)?
    bool would_cycle(std::string_view bank, std::string_view parent) const;

    // accounting.md §9 (accounting.banks' answer).
    nlohmann::json to_json() const;
    // Error EPROTO naming the first bad field.
    static Result<BankTable> from_json(const nlohmann::json& j);
};

// Fair Tree (accounting.md §6): sets every bank's subtree usage and every
// association's fairshare from shares and usage, and orders both lists
// as the tree is visited. Associations of unknown banks get 0 and go last.
void fair_tree(BankTable& table);

}  // namespace banyan
