// QueueStates: what an admin did to a named queue, with its reason —
// disabled (it takes no submissions: the job manager's) or stopped (it
// starts no job: the scheduler's) — kept in STATEDIR/queues.db so that it
// survives any restart of rank 0 (doc/spec/sched.md §8). Each service
// keeps its own kind. Writes run on a thread of their own (DbWorker):
// rank 0's loop never waits on the disk.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/db_worker.hpp"
#include "core/reactor.hpp"
#include "core/result.hpp"

namespace banyan {

class QueueStates {
  public:
    enum class Kind { disabled, stopped };
    // Opens (creating) the file and reads this kind's rows into `loaded`
    // (queue -> reason), at a service's start.
    static Result<std::unique_ptr<QueueStates>> open(Reactor& reactor, const std::string& statedir, Kind kind,
                                                     std::map<std::string, std::string>& loaded);
    // Sets (a reason) or clears (nullopt) the state of `queues`, all or
    // none; `done` runs on the loop once that is on disk, or failed.
    void store(std::vector<std::string> queues, std::optional<std::string> reason,
               std::function<void(const Result<void>&)> done);

  private:
    QueueStates(Reactor& reactor, Database db, Kind kind);
    DbWorker db_;
    Kind kind_;
};

}  // namespace banyan
