#include "broker/job_manager/purge.hpp"

#include <malloc.h>

#include <algorithm>

#include "broker/job_manager/job_manager.hpp"

namespace banyan {
namespace {

constexpr auto kPurgePeriod = std::chrono::seconds(60);

}  // namespace

Purger::Purger(JobTable& table) : table_(table), periodic_(table.broker().reactor()), soon_(table.broker().reactor()) {}

void Purger::start() {
    periodic_.start_repeating(kPurgePeriod, [this] { purge(wall_now()); });
}

void Purger::add(const Job& job) {
    inactive_[job.userid].emplace_back(job.t_inactive, job.id);
    ++count_;
}

void Purger::sort() {
    for (auto& [user, jobs] : inactive_)
        std::sort(jobs.begin(), jobs.end());
}

void Purger::purge_soon() {
    if (!soon_.active())
        soon_.start(Duration::zero(), [this] { purge(wall_now()); });
}

void Purger::remove_oldest(std::deque<std::pair<double, JobId>>& jobs) {
    auto [t_inactive, id] = jobs.front();
    jobs.pop_front();
    --count_;
    // A job requeued since (jobs.md §3) is not this entry's any more: it
    // is active, or inactive again under a later entry.
    if (const Job* job = table_.find(id); job && job->state == JobState::inactive && job->t_inactive == t_inactive)
        table_.remove(id);
}

void Purger::purge(double now) {
    for (auto user = inactive_.begin(); user != inactive_.end();) {
        auto& jobs = user->second;
        while (!jobs.empty() && now - jobs.front().first > table_.limits().inactive_age)
            remove_oldest(jobs);
        user = jobs.empty() ? inactive_.erase(user) : std::next(user);
    }
    while (count_ > table_.limits().inactive_limit) {
        auto most = std::max_element(inactive_.begin(), inactive_.end(),
                                     [](const auto& x, const auto& y) { return x.second.size() < y.second.size(); });
        remove_oldest(most->second);
        if (most->second.empty())
            inactive_.erase(most);
    }
    // Once the queue drains, the memory its jobs held goes back to the
    // system (malloc keeps freed heap otherwise): a broker that ran 100,000
    // jobs is as small as one that ran 10,000.
    bool drained = table_.size() == count_;
    if (drained && !trimmed_)
        malloc_trim(0);
    trimmed_ = drained;
}

}  // namespace banyan
