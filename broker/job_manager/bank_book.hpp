// BankBook: the job manager's book of banks (doc/spec/accounting.md §5,
// §8): which bank a submission is charged to, each association's
// fair-share, and what the jobs charged to a bank or association hold of
// its limits, with the jobs that wait for room under them. The table
// comes from the accounting service (job-manager.banks).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/jobid.hpp"
#include "core/result.hpp"
#include "sched/banks.hpp"

namespace banyan {

struct Job;

class BankBook {
  public:
    // A new table; what jobs hold is kept (by bank name and user).
    void set(BankTable table);
    bool any() const { return !table_.empty(); }
    const BankTable& table() const { return table_; }

    // The bank a submission of `userid` asking for `asked` ("": none) is
    // charged to: "" without banks, or for the owner in no bank. Error
    // (EINVAL/EPERM) naming the bank: unknown, not the user's, or the user
    // is in none.
    Result<std::string> resolve(uint32_t userid, const std::string& asked, bool owner) const;
    // Of the job's association; 0 for a job with no bank.
    double fairshare(uint32_t userid, const std::string& bank) const;

    // Why a job is refused at submit (EDQUOT): a submit limit reached, a
    // running limit it alone is over, no time limit under
    // max-run-core-minutes. "" when none.
    std::string refused(const Job& job) const;
    // Counted for max-submit-jobs from submit to inactive.
    void submitted(const Job& job);
    void ended(const Job& job);

    // Why a job may not go to the scheduler now ("limit: ..."), or "".
    std::string over_running(const Job& job) const;
    // Its ask is counted against its limits (once) until uncharge().
    void charge(const Job& job);
    bool charged(JobId id) const { return charges_.count(id) > 0; }
    // The top bank of the tree it was charged in (where room was made),
    // or none when it was not charged.
    std::optional<std::string> uncharge(JobId id);

    // Jobs over a running limit wait here, best first (the job says why:
    // Job::limit).
    void wait(const Job& job);
    bool unwait(JobId id);
    bool is_waiting(JobId id) const { return waiting_keys_.count(id) > 0; }
    // Best first: all of them, or those of one top bank's tree (only room
    // made there can let them go).
    std::vector<JobId> waiting(const std::optional<std::string>& top = std::nullopt) const;

  private:
    // What jobs hold of the running limits.
    struct Use {
        int64_t jobs = 0, nodes = 0, cores = 0, gpus = 0, core_minutes = 0;
        void add(const Use& u, int sign);
    };
    // Where a job is counted: its association, and its bank and the banks
    // above it as they were then (taken back from the same ones).
    using Chain = std::shared_ptr<const std::vector<std::string>>;  // a bank and those above it
    struct Counted {
        uint32_t userid = 0;
        Chain banks;
        Use use;
    };
    static Use ask_of(const Job& job);
    Counted counted_of(const Job& job) const;
    // Where limits apply and jobs are counted: an association (a userid
    // and its bank), or a bank (no userid) for its whole subtree.
    using Scope = std::pair<std::optional<uint32_t>, std::string>;
    // Calls fn(scope) for a counted job's scopes, its association first,
    // then its bank and each above it, until fn returns true.
    template <class Fn>
    static void each_scope(const Counted& c, Fn fn) {
        if (fn(Scope{c.userid, c.banks->front()}))
            return;
        for (const auto& bank : *c.banks)
            if (fn(Scope{std::nullopt, bank}))
                return;
    }
    // The scope's limits in the table; null for one it no longer has.
    const BankLimits* limits_of(const Scope& scope) const;
    // "limit: WHO NAME N" for the first limit `ask` on top of `held` is
    // over, or "".
    static std::string over(const BankLimits& limits, const Use& held, const Use& ask, const Scope& scope);
    // "uid U in bank 'B'", or "bank 'B'".
    static std::string who_of(const Scope& scope);

    struct UserKeyHash {
        size_t operator()(const std::pair<uint32_t, std::string>& k) const {
            return std::hash<std::string>()(k.second) * 31 + k.first;
        }
    };
    BankTable table_;
    std::map<std::string, size_t, std::less<>> bank_index_;
    std::unordered_map<std::pair<uint32_t, std::string>, size_t, UserKeyHash> user_index_;
    std::unordered_map<uint32_t, std::vector<size_t>> users_banks_;  // userid -> associations
    std::unordered_map<std::string, Chain> chains_;

    std::unordered_map<JobId, Counted> charges_;  // asked of the scheduler or running
    std::map<Scope, Use> use_;                     // what those hold, by scope
    std::unordered_map<JobId, Counted> active_;    // submitted, not yet ended
    std::map<Scope, int64_t> active_count_;        // how many of those, by scope

    using Key = std::tuple<int64_t, double, JobId>;  // (-priority, t_submit, id)
    std::map<std::string, std::set<Key>, std::less<>> waiting_;  // by top bank
    std::unordered_map<JobId, std::pair<std::string, Key>> waiting_keys_;
};

}  // namespace banyan
