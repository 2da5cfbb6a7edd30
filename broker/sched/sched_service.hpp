// SchedService: the scheduler at rank 0 (doc/spec/sched.md section 7). The
// job manager asks it to place jobs (sched.alloc, answered when the job
// starts), gives resources back (sched.free), takes pending jobs out
// (sched.cancel), changes priorities (sched.prioritize) and, after either
// side restarts, says which jobs hold what (sched.hello). sched.queue lists
// the pending jobs with their reason and estimated start;
// sched.resource-status says what is allocated. Once the instance runs it
// acquires the graph from the resource service and then every change of
// node state or shape (resource.acquire, a stream), and applies each before
// its next pass.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "broker/broker.hpp"
#include "broker/queue_states.hpp"
#include "core/histogram.hpp"
#include "core/reactor.hpp"
#include "sched/named_queues.hpp"
#include "sched/sched_queue.hpp"

namespace banyan {

class SchedService {
  public:
    // Reads [sched] (queue-policy, match-policy, queue-depth,
    // reservation-depth) and, at rank 0, registers the methods. Error: a
    // bad [sched] value, named.
    static Result<std::unique_ptr<SchedService>> start(Broker& broker);

  private:
    explicit SchedService(Broker& broker) : broker_(broker), pass_timer_(broker.reactor()) {}
    void register_methods();
    void acquire_resources();
    // One answer of the resource.acquire stream: a graph and/or node states.
    void on_resources(const Message& response);
    void on_resource_status(const Message& req);
    // Runs `handle` now if the graph is loaded, else once it is.
    Broker::Handler with_graph(Broker::Handler handle);
    void on_alloc(const Message& req);
    void on_feasibility(const Message& req);
    void on_free(const Message& req);
    void on_cancel(const Message& req);
    void on_prioritize(const Message& req);
    void on_extend(const Message& req);
    void on_hello(const Message& req);
    // Advance reservations (sched_reservations.cpp).
    void on_reserve(const Message& req);
    void on_unreserve(const Message& req);
    void on_queue(const Message& req);
    void on_queue_list(const Message& req);
    void on_queue_start(const Message& req);
    struct Lane;
    // The lane of a job asking for `queue` ("" without queues). Error
    // EINVAL: an unknown queue.
    Result<Lane*> lane_named(const std::string& queue);
    // The jobspec of a request (`p`), its queue's node constraint joined
    // to its own, and its lane. Error names what is wrong.
    Result<std::pair<Lane*, Jobspec>> lane_and_jobspec(const nlohmann::json& p, std::string_view topic);
    // The lane of a job the scheduler knows. Error ENOENT.
    Result<Lane*> lane_of(uint64_t id);
    static std::string stopped_reason(const Lane& lane);
    void start_queues(const std::vector<std::string>& names, bool start, const std::string& reason);
    // Coalesces the requests of one reactor turn into one pass.
    void schedule_soon();
    void run_pass();
    // Preemption (sched.md §9), after each pass: the first job blocked for
    // want of resources in each queue of a tier above 0 may preempt.
    void preempt(int64_t now);
    // The fewest running jobs of lower tiers (not `off`, not being
    // preempted) without which `job` fits now (sched/preemption.hpp), each
    // with its lane.
    std::vector<std::pair<uint64_t, size_t>> choose_victims(const Lane& lane, const PendingJob& job, int64_t now);
    // A victim's resources are free, or its preemptor started or left.
    void victim_gone(uint64_t id);

    // One queue of jobs ([queues.NAME], or the one unnamed queue): its own
    // order and policy, its nodes by constraint, started or stopped
    // (sched.queue-start; kept in STATEDIR/queues.db: QueueStates).
    struct Lane {
        NamedQueue config;
        std::unique_ptr<SchedQueue> queue;
        std::optional<Constraint> nodes;
        bool started = true;
        std::string stop_reason;
    };

    Broker& broker_;
    std::unique_ptr<MatchPolicy> match_policy_;  // until the matcher is made, which takes it
    QueueConfig queue_config_;
    NamedQueues named_;
    std::unique_ptr<QueueStates> queue_states_;            // rank 0: stopped queues, on disk
    std::map<std::string, std::string> stopped_at_start_;  // queue -> reason, until the lanes are made
    std::unique_ptr<Matcher> matcher_;
    std::vector<Lane> lanes_;                                 // empty until the graph is there
    // sched.feasibility payloads answered "fits" since the graph last
    // changed: a burst of like jobs (--cc, arrays, workflows) is checked
    // once. Bounded: emptied when it would hold kMaxFeasibleBytes.
    std::unordered_set<std::string> feasible_;
    size_t feasible_bytes_ = 0;
    std::map<uint64_t, size_t> lane_index_;                   // job -> lanes_ index, pending and running
    std::map<uint64_t, Message> waiting_;                     // alloc requests, answered when the job starts
    std::map<uint64_t, uint64_t> preempted_by_;  // victim -> its preemptor, until the victim's resources are free
    struct Preempting {
        size_t victims;  // still holding resources
        int64_t tier;    // of its queue
    };
    std::map<uint64_t, Preempting> preempting_;  // by preemptor
    std::vector<std::pair<Broker::Handler, Message>> early_;  // requests before the graph
    Timer pass_timer_;
    bool pass_soon_ = false;
    Histogram pass_seconds_;  // each pass's duration (sched.stats)  // pass_timer_ is armed for "now", not the retry
};

}  // namespace banyan
