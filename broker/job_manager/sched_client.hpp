// SchedClient: the job manager's side of the scheduler (doc/spec/sched.md).
// Jobs in SCHED: asked for with sched.alloc, the best `sched_window` at a
// time (priority, then submit time; the rest wait here, in order: at
// 100,000 pending jobs the scheduler would otherwise hold them all);
// an answer with R goes to JobTable::allocated(). Jobs in RUN and
// CLEANUP: hold the R it gave until free(). After a restart of rank 0,
// restore() hands it the R that running jobs hold.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "core/jobid.hpp"
#include "core/message.hpp"

namespace banyan {

class JobTable;
struct Job;

class SchedClient {
  public:
    explicit SchedClient(JobTable& table) : table_(table) {}
    // A job in SCHED with a priority above 0: asked for now, or once the
    // window has room for it.
    void request(const Job& job);
    // No longer pending (ended, held, dropped): forgotten here and at the
    // scheduler.
    void withdraw(JobId id);
    // Its priority changed while in SCHED: moved in the window, told to
    // the scheduler, or withdrawn there if held (priority 0).
    void reprioritize(const Job& job);
    // sched.hello: [{id, R}] of jobs holding resources, before any request.
    void restore(nlohmann::json jobs);
    bool holds(JobId id) const { return held_.count(id) > 0; }
    // Pending here: asked, or waiting for room in the window.
    bool is_known(JobId id) const { return keys_.count(id) > 0; }
    // Gives a job's R back; `done` once the scheduler has it.
    void free(JobId id, std::function<void()> done);

  private:
    using Key = std::tuple<int64_t, double, JobId>;  // (-priority, t_submit, id): best first
    static Key key_of(const Job& job);
    void fill_window();
    void send_alloc(const Job& job);
    void forget(JobId id);
    void cancel_at_scheduler(JobId id);
    void on_alloc_response(JobId id, uint64_t token, const Message& resp);

    JobTable& table_;
    // sched.alloc requests in flight: job -> token (a newer request or a
    // cancel makes the answer to an older one stale).
    std::unordered_map<JobId, uint64_t> pending_;
    uint64_t next_token_ = 1;
    std::set<Key> to_ask_;  // pending, not held, not yet asked
    std::set<Key> asked_;   // asked: a sched.alloc in flight
    std::unordered_map<JobId, Key> keys_;
    std::unordered_set<JobId> held_;  // R given by this scheduler, not yet freed
};

}  // namespace banyan
