// SchedQueue: the pending jobs and the queue policy that decides which of
// them the matcher tries, and how (doc/spec/sched.md section 6). Jobs are
// ordered by priority (highest first), then submit time, then id.
//   fcfs          the first job that does not fit stops the pass
//   easy          it gets a reservation; later jobs run only where they do
//                 not delay it (backfill)
//   conservative  every blocked job, up to reservation_depth, gets one
// A job that could not start even on an idle cluster because it needs
// drained or down nodes waits without blocking anyone (under any policy):
// nothing the jobs ahead of it do can start it sooner.
// Reservations live in the matcher's planners for one pass, so a backfilled
// job is one whose window misses every reserved resource.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sched/matcher.hpp"

namespace banyan {

enum class QueuePolicy { fcfs, easy, conservative };
Result<QueuePolicy> queue_policy_from_name(std::string_view name);

struct QueueConfig {
    QueuePolicy policy = QueuePolicy::fcfs;
    size_t queue_depth = 1000;      // pending jobs looked at per pass
    size_t reservation_depth = 64;  // conservative: most reservations per pass
    int64_t overrun_grace = 60;     // a job past its end holds its resources this much longer, again and again
};

struct PendingJob {
    uint64_t id = 0;
    Jobspec jobspec;
    int64_t priority = 0;
    double t_submit = 0;
    mutable std::string reason;         // why it is not running: "priority", "insufficient resources", ...
    std::optional<int64_t> t_estimate;  // reserved start
    // Set when an advance reservation is what holds it back (sched.md
    // §10): "waiting for reservation NAME (starts HH:MM)".
    std::string reservation_wait;

    // It runs in an advance reservation, apart from the queue's order.
    bool in_reservation() const { return !jobspec.reservation.empty(); }
    // The reason as users see it.
    const std::string& shown_reason() const { return reservation_wait.empty() ? reason : reservation_wait; }
};

// "waiting for reservation NAME (starts HH:MM)".
std::string waiting_for_reservation(const AdvanceReservation& reservation, int64_t now);

class SchedQueue {
  public:
    SchedQueue(Matcher& matcher, QueueConfig config) : matcher_(matcher), config_(config) {}

    // Queues a job. Error: EEXIST id known; ENOSPC it can never fit the
    // graph, even with every node up (the reason names why).
    Result<void> submit(uint64_t id, Jobspec jobspec, int64_t priority, double t_submit);
    // Takes a pending job out. Error ENOENT.
    Result<void> cancel(uint64_t id);
    // Gives back a running job's resources. Error ENOENT.
    Result<void> free(uint64_t id);
    // A running job now ends at `end` (its time limit changed). Error
    // ENOENT: not running here.
    Result<void> extend(uint64_t id, int64_t end);
    // Changes a pending job's priority. Error ENOENT.
    Result<void> prioritize(uint64_t id, int64_t priority);
    // Records a job that already runs on `r` (after a restart). Errors as
    // Matcher::allocate_exact.
    Result<void> restore(uint64_t id, const Rv1& r, int64_t start, int64_t end);

    // The graph changed (Matcher::reload); reservations are dropped.
    // Running jobs the new graph cannot hold are logged by the caller from
    // the returned ids and stay running here until freed.
    std::vector<uint64_t> reload(const ResourceGraph& graph);
    // Drops this queue's reservations (before another queue's reload).
    void drop_reservations();
    // Before any queue's pass at `now`: this queue's reservations dropped
    // and its running jobs past their end extended, so that another queue
    // sharing the matcher plans with neither stale.
    void prepare(int64_t now);
    // Sets the reason every pending job shows (a stopped queue).
    void annotate_pending(const std::string& reason);

    struct Started {
        uint64_t id;
        Rv1 R;
    };
    // One scheduling pass at `now`: the jobs that start, in order.
    std::vector<Started> schedule(int64_t now);

    // EASY makes no reservation in a pass with nothing free (a search of
    // the planners each time a job ends would cost most of the pass). Asked
    // when jobs will start, the first blocked job gets its reservation now,
    // kept until the next pass, as that pass would have made it.
    void reserve_first_blocked(int64_t now);
    // Pending jobs in queue order, with their annotations.
    std::vector<const PendingJob*> pending() const;
    // The first job in queue order that the last pass found blocked for
    // want of resources, or null; it stops there (not a list of 100,000).
    const PendingJob* first_blocked() const;
    bool is_pending(uint64_t id) const { return pending_.count(id) > 0; }
    size_t pending_count() const { return pending_.size(); }
    size_t running() const { return running_.size(); }
    const std::set<uint64_t>& running_ids() const { return running_; }
    const QueueConfig& config() const { return config_; }

  private:
    // A job that names an advance reservation (sched.md §10): it starts
    // only in it, once it has begun, and holds up no other job.
    std::optional<Started> start_in_reservation(PendingJob& job, int64_t now);
    // Blocked jobs whose window meets an advance reservation: those that
    // would start were no reservation there say they wait for it.
    void explain_reservation_waits(const std::vector<PendingJob*>& blocked, int64_t now);

    struct Order {
        int64_t priority;
        double t_submit;
        uint64_t id;
        bool operator<(const Order& o) const {
            if (priority != o.priority)
                return priority > o.priority;
            if (t_submit != o.t_submit)
                return t_submit < o.t_submit;
            return id < o.id;
        }
    };

    Matcher& matcher_;
    QueueConfig config_;
    std::map<uint64_t, PendingJob> pending_;
    std::map<Order, uint64_t> order_;
    std::set<uint64_t> running_;
    std::vector<uint64_t> reserved_;
    size_t in_reservation_ = 0;  // pending jobs that name an advance reservation
};

}  // namespace banyan
