#include "broker/job_manager/bank_book.hpp"

#include <cmath>

#include <fmt/format.h>

#include "broker/job_manager/job.hpp"

namespace banyan {

void BankBook::Use::add(const Use& u, int sign) {
    jobs += sign * u.jobs;
    nodes += sign * u.nodes;
    cores += sign * u.cores;
    gpus += sign * u.gpus;
    core_minutes += sign * u.core_minutes;
}

void BankBook::set(BankTable table) {
    table_ = std::move(table);
    bank_index_.clear();
    user_index_.clear();
    users_banks_.clear();
    for (size_t i = 0; i < table_.banks.size(); i++)
        bank_index_.emplace(table_.banks[i].name, i);
    // Each bank and the banks above it, once per table (bounded: a table
    // with a cycle, refused where tables are made, cannot loop here).
    chains_.clear();
    for (const auto& bank : table_.banks) {
        std::vector<std::string> chain;
        for (std::string at = bank.name; !at.empty() && chain.size() <= table_.banks.size();) {
            chain.push_back(at);
            auto b = bank_index_.find(at);
            if (b == bank_index_.end())
                break;
            at = table_.banks[b->second].parent;
        }
        chains_.emplace(bank.name, std::make_shared<const std::vector<std::string>>(std::move(chain)));
    }
    for (size_t i = 0; i < table_.users.size(); i++) {
        const auto& a = table_.users[i];
        user_index_.emplace(std::pair{a.userid, a.bank}, i);
        users_banks_[a.userid].push_back(i);
    }
}

Result<std::string> BankBook::resolve(uint32_t userid, const std::string& asked, bool owner) const {
    if (table_.empty()) {
        if (!asked.empty())
            return make_error(EINVAL, fmt::format("bank '{}': this instance has no banks", one_line(asked)));
        return std::string();
    }
    auto theirs = users_banks_.find(userid);
    if (asked.empty()) {
        if (theirs != users_banks_.end())
            for (size_t i : theirs->second)
                if (table_.users[i].is_default)
                    return table_.users[i].bank;
        if (owner)
            return std::string();
        return make_error(EPERM, fmt::format("uid {} belongs to no bank (an admin adds one with banyan bank user add)",
                                             userid));
    }
    if (!bank_index_.count(asked))
        return make_error(EINVAL, fmt::format("bank '{}': no such bank", one_line(asked)));
    if (owner || user_index_.count({userid, asked}))
        return asked;
    std::string names;
    if (theirs != users_banks_.end())
        for (size_t i : theirs->second)
            names += (names.empty() ? "" : ", ") + table_.users[i].bank;
    return make_error(EPERM, fmt::format("bank '{}': uid {} may not use it (theirs: {})", asked, userid,
                                         names.empty() ? "none" : names));
}

double BankBook::fairshare(uint32_t userid, const std::string& bank) const {
    if (bank.empty())
        return 0;
    auto it = user_index_.find({userid, bank});
    return it == user_index_.end() ? 0 : table_.users[it->second].fairshare;
}

BankBook::Use BankBook::ask_of(const Job& job) {
    Use u;
    u.jobs = 1;
    u.nodes = job.nnodes_asked;
    u.cores = static_cast<int64_t>(job.ncores);
    u.gpus = static_cast<int64_t>(job.ngpus);
    u.core_minutes = static_cast<int64_t>(std::ceil(static_cast<double>(job.ncores) * job.duration / 60));
    return u;
}

BankBook::Counted BankBook::counted_of(const Job& job) const {
    auto chain = chains_.find(job.bank);
    return {job.userid,
            chain != chains_.end() ? chain->second : std::make_shared<const std::vector<std::string>>(1, job.bank),
            ask_of(job)};
}

const BankLimits* BankBook::limits_of(const Scope& scope) const {
    if (scope.first) {
        auto a = user_index_.find({*scope.first, scope.second});
        return a == user_index_.end() ? nullptr : &table_.users[a->second].limits;
    }
    auto b = bank_index_.find(scope.second);
    return b == bank_index_.end() ? nullptr : &table_.banks[b->second].limits;
}

std::string BankBook::over(const BankLimits& limits, const Use& held, const Use& ask, const Scope& scope) {
    const std::array<std::tuple<int64_t, int64_t, int64_t, std::string_view>, 5> checks = {{
        {limits.max_running_jobs, held.jobs, ask.jobs, "max-running-jobs"},
        {limits.max_nodes, held.nodes, ask.nodes, "max-nodes"},
        {limits.max_cores, held.cores, ask.cores, "max-cores"},
        {limits.max_gpus, held.gpus, ask.gpus, "max-gpus"},
        {limits.max_run_core_minutes, held.core_minutes, ask.core_minutes, "max-run-core-minutes"},
    }};
    for (const auto& [limit, used, wanted, name] : checks)
        if (limit > 0 && wanted > 0 && used + wanted > limit)
            return fmt::format("limit: {} {} {}", who_of(scope), name, limit);
    return "";
}

std::string BankBook::who_of(const Scope& scope) {
    return scope.first ? fmt::format("uid {} in bank '{}'", *scope.first, scope.second)
                       : fmt::format("bank '{}'", scope.second);
}

std::string BankBook::refused(const Job& job) const {
    if (job.bank.empty())
        return "";
    Counted c = counted_of(job);
    std::string why;
    each_scope(c, [&](const Scope& scope) {
        const BankLimits* limits = limits_of(scope);
        if (!limits)
            return false;
        auto active = active_count_.find(scope);
        if (limits->max_submit_jobs > 0 &&
            (active == active_count_.end() ? 0 : active->second) + 1 > limits->max_submit_jobs)
            why = fmt::format("{}: max-submit-jobs {} reached (jobs submitted and not yet ended)", who_of(scope),
                              limits->max_submit_jobs);
        else if (limits->max_run_core_minutes > 0 && job.duration <= 0)
            why = fmt::format("{} has a max-run-core-minutes: a job needs a time limit (-t)", who_of(scope));
        else if (auto never = over(*limits, Use{}, c.use, scope); !never.empty())
            why = fmt::format("{} (the job alone is over it)", never.substr(7));
        return !why.empty();
    });
    return why;
}

void BankBook::submitted(const Job& job) {
    if (job.bank.empty() || active_.count(job.id))
        return;
    Counted c = counted_of(job);
    each_scope(c, [&](const Scope& scope) {
        active_count_[scope]++;
        return false;
    });
    active_.emplace(job.id, std::move(c));
}

void BankBook::ended(const Job& job) {
    auto it = active_.find(job.id);
    if (it == active_.end())
        return;
    each_scope(it->second, [&](const Scope& scope) {
        if (auto n = active_count_.find(scope); n != active_count_.end() && --n->second == 0)
            active_count_.erase(n);
        return false;
    });
    active_.erase(it);
}

std::string BankBook::over_running(const Job& job) const {
    if (job.bank.empty() || charges_.count(job.id))
        return "";
    Counted c = counted_of(job);
    std::string why;
    each_scope(c, [&](const Scope& scope) {
        if (const BankLimits* limits = limits_of(scope)) {
            auto held = use_.find(scope);
            why = over(*limits, held == use_.end() ? Use{} : held->second, c.use, scope);
        }
        return !why.empty();
    });
    return why;
}

void BankBook::charge(const Job& job) {
    if (job.bank.empty() || charges_.count(job.id))
        return;
    Counted c = counted_of(job);
    each_scope(c, [&](const Scope& scope) {
        use_[scope].add(c.use, 1);
        return false;
    });
    charges_.emplace(job.id, std::move(c));
}

std::optional<std::string> BankBook::uncharge(JobId id) {
    auto it = charges_.find(id);
    if (it == charges_.end())
        return std::nullopt;
    const Counted& c = it->second;
    each_scope(c, [&](const Scope& scope) {
        if (auto u = use_.find(scope); u != use_.end()) {
            u->second.add(c.use, -1);
            if (u->second.jobs == 0)
                use_.erase(u);
        }
        return false;
    });
    std::string top = c.banks->back();
    charges_.erase(it);
    return top;
}

void BankBook::wait(const Job& job) {
    unwait(job.id);
    Key key{-job.priority, job.t_submit, job.id};
    Counted c = counted_of(job);
    std::string top = c.banks->back();
    waiting_[top].insert(key);
    waiting_keys_.emplace(job.id, std::pair{std::move(top), key});
}

bool BankBook::unwait(JobId id) {
    auto it = waiting_keys_.find(id);
    if (it == waiting_keys_.end())
        return false;
    auto group = waiting_.find(it->second.first);
    group->second.erase(it->second.second);
    if (group->second.empty())
        waiting_.erase(group);
    waiting_keys_.erase(it);
    return true;
}

std::vector<JobId> BankBook::waiting(const std::optional<std::string>& top) const {
    std::vector<Key> keys;
    for (const auto& [name, group] : waiting_)
        if (!top || name == *top)
            keys.insert(keys.end(), group.begin(), group.end());
    if (!top)
        std::sort(keys.begin(), keys.end());  // across trees, best first
    std::vector<JobId> out;
    out.reserve(keys.size());
    for (const auto& k : keys)
        out.push_back(std::get<2>(k));
    return out;
}

}  // namespace banyan
