// NamedQueues: the [queues.NAME] tables of the config (doc/spec/sched.md
// section 8): Flux's named queues, Slurm's partitions. Read the same way
// by the job manager (which queue a job is in, its limits, enabled or not)
// and by the scheduler (the queue's nodes and policy, started or not).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.hpp"
#include "core/result.hpp"
#include "sched/sched_queue.hpp"

namespace banyan {

struct NamedQueue {
    std::string name;
    std::string requires_text;                 // the nodes of the queue, as --requires writes them
    std::optional<nlohmann::json> constraint;  // its RFC 31 form
    bool is_default = false;
    double max_duration = 0;          // seconds; 0: none. Also the duration of a job that gives none.
    int64_t max_nodes = 0;            // per job; 0: none
    int64_t max_active_per_user = 0;  // 0: none
    QueuePolicy policy = QueuePolicy::fcfs;
    int64_t priority = 0;  // 0 to 10^6: its jobs' queue factor over the highest (accounting.md §7)
    // Preemption (doc/spec/sched.md §9): its jobs may preempt those of
    // lower tiers; what becomes of its own when preempted, and how they
    // are ended.
    int64_t priority_tier = 0;
    enum class PreemptMode { cancel, requeue, off } preempt_mode = PreemptMode::cancel;
    double preempt_grace = 30;  // seconds from preempt_signal to SIGKILL
    int preempt_signal = 15;    // SIGTERM
};

std::string_view preempt_mode_name(NamedQueue::PreemptMode mode);

struct NamedQueues {
    std::vector<NamedQueue> queues;  // by name

    bool empty() const { return queues.empty(); }
    const NamedQueue* find(const std::string& name) const;
    const NamedQueue* default_queue() const;
    // The queue a job asked for (attributes.system.queue, "" if none), or
    // the default. Error: there are queues and the name is unknown, or none
    // was asked and there is no default; the message lists the queues.
    Result<const NamedQueue*> resolve(const std::string& asked) const;
    std::string names() const;  // "a, b"

    // Error names FILE: queues.NAME.KEY and what is wrong: an unknown key,
    // a value of the wrong type, a bad requires or policy, two defaults.
    // `sched_policy` is the policy of a queue that names none.
    static Result<NamedQueues> read(const Config& config, QueuePolicy sched_policy = QueuePolicy::fcfs);
};

}  // namespace banyan
