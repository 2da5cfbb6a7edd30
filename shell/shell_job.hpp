// ShellJob: what one banyan-shell runs, read from the first line the exec
// service writes (doc/spec/shell.md section 3) and the shell options of
// the jobspec (section 5).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/jobid.hpp"
#include "core/result.hpp"
#include "resource/rv1.hpp"
#include "sched/shell_options.hpp"
#include "sched/taskmap.hpp"

namespace banyan {

struct ShellJob {
    JobId id = 0;
    uint32_t rank = 0;  // this broker's rank
    Rv1 R;
    TaskMap map;
    TaskMap::Block local;  // this rank's tasks
    uint32_t nnodes = 0;
    std::vector<std::string> command;
    std::string name;             // attributes.system.job.name
    uint64_t cores_per_task = 1;  // each slot's
    uint64_t gpus_per_task = 0;
    std::vector<std::string> environment;  // "K=V", BANYAN_* left out
    std::string cwd;
    std::string uri;     // the broker's socket, for BANYAN_URI
    std::string tmpdir;  // this shell's own directory (PMIx rendezvous files)
    uint32_t host_brokers = 1;  // brokers of the instance on this host (exec service); > 1: cores overlap
    std::string topology;  // this machine's hwloc XML, saved by the exec service; empty: discover
    std::string container_cache;        // exec.container-cache, {uid} still in it
    uint64_t container_cache_size = 0;  // exec.container-cache-size, bytes
    ShellOptions options;

    // The host name of broker rank `rank`, from R's nodelist ("rank<N>"
    // when R has none).
    std::string host_of(uint32_t rank) const;
    // Error names the field: "shell.options.cpu-affinity: ...".
    static Result<ShellJob> parse(const nlohmann::json& message);
    Result<void> set_array_element(const nlohmann::json& array);
    // Replaces the templates of the output files that are the same for
    // every task: {{id.dec}}, {{name}}, {{user}}, and outside an array
    // Slurm's %A and %a ({{array_id.dec}}: the job's id; {{array_index}},
    // in a Slurm job only: 4294967294, Slurm's NO_VAL).
    void expand_job_templates(const std::string& user);
    // The variables Slurm gives each task (doc/spec/slurm.md §6), for task
    // `local` of this rank's, with global rank `rank`.
    std::vector<std::string> slurm_environment(uint32_t rank, uint32_t local, size_t cores_here) const;
};

// `path` with {{id}}, {{taskid}} and {{node}} replaced.
std::string expand_output_template(std::string path, JobId id, uint32_t task, const std::string& node);

}  // namespace banyan
