#include "sched/sched_queue.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/duration.hpp"

namespace banyan {

namespace {
constexpr const char* kWaitingForNodes = "waiting for drained, down or unjoined nodes";
}  // namespace

std::string waiting_for_reservation(const AdvanceReservation& reservation, int64_t now) {
    return fmt::format("waiting for reservation {} (starts {})", reservation.name,
                       format_clock(static_cast<double>(reservation.start), static_cast<double>(now)));
}

Result<QueuePolicy> queue_policy_from_name(std::string_view name) {
    if (name == "fcfs")
        return QueuePolicy::fcfs;
    if (name == "easy")
        return QueuePolicy::easy;
    if (name == "conservative")
        return QueuePolicy::conservative;
    return make_error(EINVAL, fmt::format("unknown queue policy '{}' (known: fcfs, easy, conservative)", name));
}

Result<void> SchedQueue::submit(uint64_t id, Jobspec jobspec, int64_t priority, double t_submit) {
    if (pending_.count(id) || running_.count(id))
        return make_error(EEXIST, fmt::format("job {} is already known to the scheduler", id));
    // An impossible job is refused now rather than left waiting forever;
    // one that needs nodes that are drained or down now waits for them.
    // Only on its nodes (and only in its window: schedule()).
    if (auto confined = matcher_.reservations().confine(jobspec); !confined)
        return confined;
    if (auto fits = matcher_.could_ever_fit(jobspec); !fits)
        return fits.error();
    PendingJob job{id, std::move(jobspec), priority, t_submit, "priority", std::nullopt};
    in_reservation_ += job.in_reservation();
    order_.emplace(Order{priority, t_submit, id}, id);
    pending_.emplace(id, std::move(job));
    return {};
}

Result<void> SchedQueue::cancel(uint64_t id) {
    auto it = pending_.find(id);
    if (it == pending_.end())
        return make_error(ENOENT, fmt::format("job {} is not pending", id));
    order_.erase(Order{it->second.priority, it->second.t_submit, id});
    in_reservation_ -= it->second.in_reservation();
    pending_.erase(it);
    if (auto r = std::find(reserved_.begin(), reserved_.end(), id); r != reserved_.end()) {
        (void)matcher_.cancel(id);
        reserved_.erase(r);
    }
    return {};
}

Result<void> SchedQueue::free(uint64_t id) {
    if (!running_.erase(id))
        return make_error(ENOENT, fmt::format("job {} holds no resources", id));
    // A job that a reload could not place again holds nothing to give back.
    (void)matcher_.cancel(id);
    return {};
}

void SchedQueue::annotate_pending(const std::string& reason) {
    for (auto& [id, job] : pending_) {
        job.reason = reason;
        job.reservation_wait.clear();
        job.t_estimate.reset();
    }
}

std::vector<uint64_t> SchedQueue::reload(const ResourceGraph& graph) {
    drop_reservations();
    return matcher_.reload(graph);
}

Result<void> SchedQueue::extend(uint64_t id, int64_t end) {
    if (!running_.count(id))
        return make_error(ENOENT, fmt::format("job {} is not running", id));
    drop_reservations();  // planned with its old end
    return matcher_.extend(id, end);
}

Result<void> SchedQueue::prioritize(uint64_t id, int64_t priority) {
    auto it = pending_.find(id);
    if (it == pending_.end())
        return make_error(ENOENT, fmt::format("job {} is not pending", id));
    order_.erase(Order{it->second.priority, it->second.t_submit, id});
    it->second.priority = priority;
    order_.emplace(Order{priority, it->second.t_submit, id}, id);
    return {};
}

Result<void> SchedQueue::restore(uint64_t id, const Rv1& r, int64_t start, int64_t end) {
    // Reservations are plans for one pass; a running job comes first.
    drop_reservations();
    if (auto done = matcher_.allocate_exact(id, r, start, end); !done)
        return done;
    running_.insert(id);
    return {};
}

void SchedQueue::drop_reservations() {
    for (uint64_t id : reserved_) {
        (void)matcher_.cancel(id);
        if (auto it = pending_.find(id); it != pending_.end())
            it->second.t_estimate.reset();  // no longer planned (a pass may not reach it again)
    }
    reserved_.clear();
}

void SchedQueue::prepare(int64_t now) {
    drop_reservations();
    // A job still running at its expected end keeps its resources: no
    // reservation may be planned on them as if they were free.
    for (uint64_t id : running_) {
        const Matcher::Job* j = matcher_.job(id);
        if (j && j->end <= now)
            (void)matcher_.extend(id, now + config_.overrun_grace);
    }
}

std::vector<SchedQueue::Started> SchedQueue::schedule(int64_t now) {
    prepare(now);
    std::vector<Started> started;
    size_t reservations = config_.policy == QueuePolicy::fcfs   ? 0
                          : config_.policy == QueuePolicy::easy ? 1
                                                                : config_.reservation_depth;
    bool only_in_reservation = false;  // past the point where ordinary jobs stop
    bool any_reservation = !matcher_.reservations().empty();
    std::vector<PendingJob*> blocked_meeting;  // blocked, their window meeting an advance reservation
    size_t looked = 0;
    for (auto it = order_.begin(); it != order_.end() && looked < config_.queue_depth; ++looked) {
        PendingJob& job = pending_.at(it->second);
        if (job.in_reservation()) {
            if (auto s = start_in_reservation(job, now)) {
                started.push_back(std::move(*s));
                --in_reservation_;
                running_.insert(job.id);
                pending_.erase(job.id);
                it = order_.erase(it);
            } else {
                ++it;
            }
            continue;
        }
        if (only_in_reservation) {
            ++it;  // only jobs in a reservation may still start
            continue;
        }
        job.t_estimate.reset();
        job.reservation_wait.clear();
        // EASY's one reservation only guards the first blocked job against
        // jobs started after it, and with nothing free none can start now:
        // it is made in the next pass that has room (a reservation costs a
        // search of the planners, once per pass). Conservative reserves
        // every blocked job, to say when each will start.
        bool easy = config_.policy == QueuePolicy::easy;
        MatchOp op = reservations > 0 && (!easy || matcher_.any_free(now)) ? MatchOp::allocate_orelse_reserve
                                                                           : MatchOp::allocate_with_satisfiability;
        auto r = matcher_.match(job.jobspec, op, now, job.id);
        if (r && r->matched && !r->reserved) {
            started.push_back({job.id, matcher_.to_rv1(r->claims, r->start, r->end, Matcher::RMemory::written)});
            running_.insert(job.id);
            pending_.erase(job.id);
            it = order_.erase(it);
            continue;
        }
        if (r && r->matched) {
            reserved_.push_back(job.id);
            --reservations;
            job.t_estimate = r->start;
        }
        ++it;
        if (r && r->unsatisfiable) {
            job.reason = kWaitingForNodes;
            continue;
        }
        job.reason = "insufficient resources";
        if (any_reservation && matcher_.reservations().first_meeting(now, Matcher::window_end(job.jobspec, now)))
            blocked_meeting.push_back(&job);
        // Backfilling looks further only while something is free: with
        // every core and GPU in use no later job can start now, and
        // trying each of queue-depth jobs cost a full pass per free.
        // FCFS: the rest wait on the first (pending() says so). Either way
        // a job that runs in an advance reservation may still start: its
        // nodes are its own.
        if (config_.policy == QueuePolicy::fcfs || (easy && !matcher_.any_free(now))) {
            if (in_reservation_ == 0)
                break;
            only_in_reservation = true;
        }
    }
    if (!blocked_meeting.empty())
        explain_reservation_waits(blocked_meeting, now);
    return started;
}

std::optional<SchedQueue::Started> SchedQueue::start_in_reservation(PendingJob& job, int64_t now) {
    const AdvanceReservation* in = matcher_.reservations().find(job.jobspec.reservation);
    if (!in) {
        // Its end or deletion answers the job (the service): only a moment.
        job.reason = fmt::format("reservation {} is gone", job.jobspec.reservation);
        return std::nullopt;
    }
    if (now < in->start) {
        job.reason = waiting_for_reservation(*in, now);
        return std::nullopt;
    }
    auto r = matcher_.match(job.jobspec, MatchOp::allocate, now, job.id);
    if (r && r->matched)
        return Started{job.id, matcher_.to_rv1(r->claims, r->start, r->end, Matcher::RMemory::written)};
    job.reason = fmt::format("insufficient resources in reservation {}", in->name);
    return std::nullopt;
}

void SchedQueue::explain_reservation_waits(const std::vector<PendingJob*>& blocked, int64_t now) {
    auto lifted = matcher_.reservations().lift_all();
    for (PendingJob* job : blocked) {
        // A job reserved for later holds that plan under its id: put aside
        // while it is asked whether it would start now.
        std::optional<Allocation> planned;
        if (const Matcher::Job* held = matcher_.job(job->id)) {
            planned = *held;
            (void)matcher_.cancel(job->id);
        }
        if (matcher_.fits_now(job->jobspec, now))
            if (const AdvanceReservation* first =
                    matcher_.reservations().first_meeting(now, Matcher::window_end(job->jobspec, now)))
                job->reservation_wait = waiting_for_reservation(*first, now);
        if (planned)
            (void)matcher_.put_back(job->id, std::move(*planned));
    }
}

void SchedQueue::reserve_first_blocked(int64_t now) {
    if (config_.policy != QueuePolicy::easy || !reserved_.empty() || matcher_.any_free(now))
        return;  // (with something free the pass made it, or will: nothing may start here)
    for (const auto& [order, id] : order_) {
        PendingJob& job = pending_.at(id);
        if (job.reason == kWaitingForNodes || job.in_reservation())
            continue;  // blocks no one
        if (job.reason != "insufficient resources")
            return;  // not through a pass yet, or its queue stopped
        auto r = matcher_.match(job.jobspec, MatchOp::allocate_orelse_reserve, now, job.id);
        if (r && r->matched && r->reserved) {
            reserved_.push_back(job.id);
            job.t_estimate = r->start;
        } else if (r && r->matched) {
            (void)matcher_.cancel(job.id);  // it fits now after all: the next pass starts it, not this
        }
        return;
    }
}

const PendingJob* SchedQueue::first_blocked() const {
    for (const auto& [order, id] : order_)
        if (const PendingJob& job = pending_.at(id); job.reason == "insufficient resources")
            return &job;
    return nullptr;
}

std::vector<const PendingJob*> SchedQueue::pending() const {
    std::vector<const PendingJob*> out;
    out.reserve(order_.size());
    bool blocked = false;
    for (const auto& [order, id] : order_) {
        const PendingJob& job = pending_.at(id);
        // FCFS passes stop at the first job that cannot start; one waiting
        // for drained or down nodes, or in a reservation, blocks no one.
        if (job.reason != kWaitingForNodes && !job.in_reservation()) {
            if (config_.policy == QueuePolicy::fcfs && blocked)
                job.reason = "priority";
            blocked = true;
        }
        out.push_back(&job);
    }
    return out;
}

}  // namespace banyan
