// bench-priority USERS BANKS JOBS: one recomputation of fair-share and of
// every pending job's priority (doc/spec/accounting.md §6, §7), in process.
//   fair tree   Fair Tree over the bank tree (the accounting service's
//               reader thread: off the loop)
//   priorities  each pending job's priority from its association's factor
//               (the job manager's loop), and the changed ones moved in an
//               ordered set as the scheduler client's window is
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_util.hpp"
#include "broker/job_manager/bank_book.hpp"
#include "broker/job_manager/job.hpp"
#include "sched/banks.hpp"
#include "sched/priority.hpp"

using namespace banyan;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: bench-priority USERS BANKS JOBS\n");
        return 2;
    }
    size_t users = std::stoul(argv[1]), banks = std::stoul(argv[2]), jobs = std::stoul(argv[3]);
    std::mt19937_64 rng(42);
    // A tree of banks: 20 at the top, the rest below a random earlier one.
    BankTable t;
    for (size_t b = 0; b < banks; b++) {
        std::string parent = b < 20 ? "" : t.banks[rng() % b].name;
        t.banks.push_back({fmt::format("bank{}", b), parent, static_cast<int64_t>(1 + rng() % 10), {}, 0});
    }
    for (size_t u = 0; u < users; u++) {
        Association a;
        a.userid = static_cast<uint32_t>(1000 + u);
        a.bank = t.banks[rng() % banks].name;
        a.is_default = true;
        a.usage = static_cast<double>(rng() % 1000000);
        t.users.push_back(a);
    }
    auto start = Clock::now();
    fair_tree(t);
    double tree_ms = ms_since(start);

    BankBook book;
    book.set(t);
    PrioritySettings settings;
    std::vector<Job> pending(jobs);
    using Key = std::tuple<int64_t, double, JobId>;
    std::set<Key> order;
    for (size_t i = 0; i < jobs; i++) {
        const Association& a = t.users[rng() % users];
        Job& j = pending[i];
        j.id = i + 1;
        j.userid = a.userid;
        j.bank = a.bank;
        j.urgency = 16;
        j.t_submit = static_cast<double>(i);
        j.priority = 1;  // as before the new factors
        order.insert({-j.priority, j.t_submit, j.id});
    }
    // In slices of 5,000 jobs, as the job manager takes them (one a loop
    // turn): the longest slice is what the loop waits at most.
    start = Clock::now();
    size_t changed = 0;
    double longest = 0;
    auto slice_start = Clock::now();
    for (size_t i = 0; i < pending.size(); i++) {
        if (i % 5000 == 0) {
            longest = std::max(longest, ms_since(slice_start));
            slice_start = Clock::now();
        }
        Job& j = pending[i];
        PriorityFactors f;
        f.fairshare = book.fairshare(j.userid, j.bank);
        f.urgency = static_cast<double>(j.urgency) / kMaxUrgency;
        int64_t p = combine_priority(settings, j.urgency, f);
        if (p == j.priority)
            continue;
        order.erase({-j.priority, j.t_submit, j.id});
        j.priority = p;
        order.insert({-j.priority, j.t_submit, j.id});
        changed++;
    }
    longest = std::max(longest, ms_since(slice_start));
    double jobs_ms = ms_since(start);
    std::printf("priority: %zu users in %zu banks: fair tree %.1f ms (off the loop); %zu pending jobs: %.1f ms "
                "in all, longest 5,000-job slice %.2f ms (%zu changed and reordered); peak RSS %ld MB\n",
                users, banks, tree_ms, jobs, jobs_ms, longest, changed, peak_rss_mb());
    return 0;
}
