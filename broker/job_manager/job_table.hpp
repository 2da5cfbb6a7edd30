// JobTable: what the job manager's parts (sched_client, exec_client,
// watchers, event_streams, purge) may see and do of its jobs. The
// lifecycle stays the manager's: a part reports what happened (post,
// raise, allocated, release) and the manager decides what follows. Only
// recovery, which rebuilds the manager's state at start, reaches further.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "broker/job_manager/job.hpp"
#include "core/message.hpp"

namespace banyan {

class Broker;
class JobDb;
struct JobManagerLimits;

class JobTable {
  public:
    virtual Broker& broker() = 0;
    virtual JobDb& db() = 0;
    virtual const JobManagerLimits& limits() const = 0;
    // Whether the instance's initial program (if any) lets jobs be scheduled.
    virtual bool instance_running() const = 0;

    // A job in memory (any state until purged), or null.
    virtual Job* find(JobId id) = 0;
    virtual size_t size() const = 0;
    // Forgets an inactive job, in memory and on disk (the purge).
    virtual void remove(JobId id) = 0;

    // Records an event at `timestamp` (0: now) and takes the steps its
    // state change allows.
    virtual void post(Job& job, std::string name, nlohmann::json context = nlohmann::json::object(),
                      double timestamp = 0) = 0;
    // An exception of `type` (severity 0: the job ends) with `note`.
    virtual void raise(Job& job, std::string type, std::string note, uint32_t userid) = 0;
    // A running or inactive job back to pending, with its id (a running
    // one's tasks end first): jobs.md §3. Then `done` with "" once the
    // event is posted, or why not (another state, or its jobspec unread).
    virtual void requeue(Job& job, std::string note, uint32_t userid,
                         std::function<void(const std::string&)> done) = 0;
    // The scheduler gave the job R.
    virtual void allocated(Job& job, nlohmann::json R) = 0;
    // The job's tasks are gone everywhere: its R goes back.
    virtual void release(Job& job) = 0;
    // Sends `response` once everything written so far is on disk.
    virtual void respond_once_stored(Message response) = 0;

  protected:
    virtual ~JobTable() = default;
};

}  // namespace banyan
