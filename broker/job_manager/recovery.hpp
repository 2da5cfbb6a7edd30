// Recovery: rank 0 starting on a job database, and ranks coming (back)
// online (doc/spec/jobs.md §8, doc/spec/jobdb.md "On start"). restore()
// rebuilds every job, in any state, from its jobspec and eventlog. Once
// the instance runs, resume() gives the scheduler back the R of jobs in
// RUN and CLEANUP (before any pending job is asked for), re-attaches
// their tasks, lets every other active job go on, and reconciles the
// online ranks; ranks_changed() reconciles each rank that joins later.
#pragma once

#include <string>
#include <unordered_map>

#include "core/idset.hpp"
#include "core/jobid.hpp"
#include "core/result.hpp"

namespace banyan {

class JobManager;

class Recovery {
  public:
    explicit Recovery(JobManager& jm) : jm_(jm) {}
    Result<void> restore();
    void resume();
    void ranks_changed();

  private:
    JobManager& jm_;
    // R (JSON text) of the jobs replayed in RUN or CLEANUP, until resume().
    std::unordered_map<JobId, std::string> held_R_;
    IdSet known_online_;  // ranks online at the last subtree change
};

}  // namespace banyan
