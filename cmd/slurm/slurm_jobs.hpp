// What the Slurm front ends share (doc/spec/slurm.md §5-§6): a job as
// Slurm's commands show it, from job-manager.list's rows or accounting
// records, and Slurm's names and forms for its fields.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cmd/cli_util.hpp"

namespace banyan::cli::slurm {

struct SlurmJob {
    JobId id = 0;
    std::optional<JobId> array_id;  // an element of an array: the array's id and its index
    uint32_t index = 0;
    bool is_array = false;     // the array itself
    std::string array_left;    // its indexes not yet made ("3-100%10"), while pending
    uint32_t userid = 0;
    std::string name;
    std::string state;         // Slurm's: PENDING, RUNNING, COMPLETED, ...
    std::string reason;        // a pending job's (squeue %r): Dependency, BeginTime, Priority, JobHeldUser...
    std::string partition;     // Banyan's queue
    std::string account;       // Banyan's bank
    std::string nodelist;
    uint64_t ntasks = 0, nnodes = 0, ncores = 0;
    double t_submit = 0, t_start = 0, t_end = 0;
    double time_limit = 0;     // seconds; 0: none
    std::optional<int> exit_code;  // the job's exit code
    int exit_signal = 0;           // the signal that ended it (status >= 128)
    double cpu = 0;
    uint64_t maxrss = 0;
    int urgency = 16;
    double priority = 0;
    std::vector<std::string> dependencies;  // unmet, in Slurm's form: "afterok:123(unfulfilled)"
    bool begin_pending = false;              // waiting for its --begin time

    // Slurm's id: "123", or "A_I" for an element of an array.
    std::string slurm_id() const;
    bool active() const { return state == "PENDING" || state == "RUNNING" || state == "COMPLETING"; }
};

// Slurm's short state: PD, R, CG, CD, F, CA, TO, OOM, NF, PR.
std::string short_state(const std::string& state);

// The user's jobs, or every user's (`all_users`: the instance owner),
// as job-manager.list has them (active, and inactive ones not yet purged).
std::vector<SlurmJob> listed_jobs(Client& client, bool all_users);
// Finished jobs from the accounting store (accounting.history `query`).
std::vector<SlurmJob> recorded_jobs(Client& client, const nlohmann::json& query);

// A job named as Slurm's commands take it: decimal or Banyan's id, A_I or
// A[I] for an element. Fails (cli::fail) naming it.
nlohmann::json slurm_job_request(const std::string& text);
// Jobs as -j names them: an id (a job, or every element of an array),
// or A_I (one element).
class JobSelection {
  public:
    explicit JobSelection(const std::vector<std::string>& texts);
    bool empty() const { return refs_.empty(); }
    bool contains(const SlurmJob& j) const;
    std::vector<JobId> ids() const;  // the ids named (an element's array's)

  private:
    std::vector<std::pair<JobId, std::optional<uint32_t>>> refs_;
};

// The words of Slurm's comma-separated id lists (-j 1,2,3 or -j 1 -j 2).
std::vector<std::string> id_list(const std::vector<std::string>& given);

// Parses a front end's command line with `app`; false when it asked for
// --help, which is then printed. Fails (CLI::ParseError) on bad options.
bool parse_or_help(CLI::App& app, const std::vector<std::string>& args);

// A time as Slurm prints it: 2026-11-28T03:40:00, or `none` for 0.
std::string slurm_time(double t, const std::string& none = "Unknown");
// A time limit as Slurm prints it: [D-]HH:MM:SS, or UNLIMITED.
std::string slurm_limit(double seconds);

// `value` padded to `width` (on the left when `right`), and cut to it
// when `cut`, as Slurm's listings do: job ids are never cut (Banyan's
// are 19 digits; a cut id names another job).
std::string pad(const std::string& value, size_t width, bool right, bool cut = true);

// A node and a partition as sinfo and scontrol show them: resource.nodes
// and job-manager.queue-list, in Slurm's states.
struct SlurmNode {
    std::string hostname;
    std::string state;  // IDLE, MIXED, ALLOCATED, DRAINING, DRAINED, DOWN; * when not responding
    std::string reason;
    uint64_t cores = 0, cores_used = 0, gpus = 0;
};
struct SlurmPartition {
    std::string name;
    bool is_default = false;
    bool enabled = true;
    double max_time = 0;  // seconds; 0: none
};
struct SlurmNodes {
    std::vector<SlurmNode> nodes;
    std::vector<SlurmPartition> partitions;  // Banyan's queues; one, "(none)", without queues
};
SlurmNodes load_nodes(Client& client);

}  // namespace banyan::cli::slurm
