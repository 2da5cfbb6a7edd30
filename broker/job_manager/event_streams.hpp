// EventStreams: job-manager.events (doc/spec/http.md §7). Every job event
// is streamed, once it is committed, to each subscriber that may see the
// job: every job for an owner, its own for a user. Nothing is buffered
// while nobody subscribes.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "broker/job_manager/job.hpp"
#include "core/message.hpp"

namespace banyan {

class JobTable;

class EventStreams {
  public:
    explicit EventStreams(JobTable& table) : table_(table) {}
    void subscribe(const Message& req);
    // job-manager.events-cancel {matchtag}: ends the caller's stream of
    // that matchtag (its last answer: ENODATA), then answers {}.
    void cancel(const Message& req);
    // An event of `job` was just recorded as its `seq`-th.
    void posted(const Job& job, uint32_t seq, const JobEvent& event);
    size_t subscribers() const { return subscribers_.size(); }

  private:
    // A user's stream past kMaxPerUser ends that user's oldest (EOVERFLOW):
    // a client that died without cancelling costs nothing for long. Past
    // kMaxSubscribers in all, a new stream is refused (EAGAIN).
    static constexpr size_t kMaxPerUser = 32;
    static constexpr size_t kMaxSubscribers = 1024;
    struct Subscriber {
        Message req;  // without payload
        bool owner;
    };
    struct Pending {
        uint32_t userid;
        nlohmann::json event;
    };
    void flush(uint64_t upto);

    JobTable& table_;
    std::map<uint64_t, Subscriber> subscribers_;  // in the order they came
    uint64_t next_subscriber_ = 1;
    std::map<uint64_t, Pending> pending_;  // posted, not yet known committed, by number
    uint64_t next_posted_ = 1;
};

}  // namespace banyan
