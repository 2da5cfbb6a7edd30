// Purger: INACTIVE jobs. Keeps each user's inactive jobs in the order they
// ended and removes them, from memory and disk, once older than
// job-manager.inactive-age or past job-manager.inactive-limit, where the
// user with the most goes first: one user's flood purges only that user's
// history. Checked after each job becomes inactive and every 60 s.
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <utility>

#include "core/jobid.hpp"
#include "core/reactor.hpp"

namespace banyan {

class JobTable;
struct Job;

class Purger {
  public:
    explicit Purger(JobTable& table);
    // Starts the periodic check.
    void start();
    // A job that became inactive (purged soon, not now: callers up the
    // stack may still hold it), or one replayed as inactive.
    void add(const Job& job);
    void purge_soon();
    // After the replay: each user's jobs in order of ending.
    void sort();
    size_t count() const { return count_; }
    void purge(double now);

  private:
    void remove_oldest(std::deque<std::pair<double, JobId>>& jobs);

    JobTable& table_;
    std::map<uint32_t, std::deque<std::pair<double, JobId>>> inactive_;  // per user: (t_inactive, id)
    size_t count_ = 0;
    Timer periodic_;
    Timer soon_;
    bool trimmed_ = false;  // memory given back since the queue last drained
};

}  // namespace banyan
