// ShellOptions: the job shell's options, from a jobspec's
// attributes.system.shell.options (doc/spec/shell.md section 5). Read by
// the job manager at submit, so a bad option is refused before the job
// waits for resources, and by the shell that runs the job.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <sys/resource.h>

#include <nlohmann/json.hpp>

#include "core/result.hpp"
#include "sched/jobspec.hpp"

namespace banyan {

enum class Affinity { on, per_task, off };

struct ShellOptions {
    Profile profile = Profile::none;
    Affinity cpu_affinity = Affinity::on;
    bool cpu_affinity_given = false;  // -o cpu-affinity was given (not the default)
    Affinity gpu_affinity = Affinity::on;
    std::optional<double> exit_timeout = 30.0;  // seconds; nullopt: none
    std::string stdout_path, stderr_path;       // templates; empty: to rank 0
    bool label = false;
    std::string input_path;                 // every task reads it
    bool forward_stdin = false;             // task 0 reads what `banyan run` sends
    bool pty = false;                       // task 0 runs on a pseudo-terminal (--pty)
    uint16_t pty_rows = 24, pty_cols = 80;  // its size at start
    bool slurm = false;                     // the tasks get Slurm's SLURM_* variables too (doc/spec/slurm.md §6)
    uint32_t slurm_ntasks = 0;              // SLURM_NTASKS when not the job's task count; 0: that count
    std::string slurm_submit_dir;           // SLURM_SUBMIT_DIR; "": the job's working directory
    std::vector<std::pair<int, rlim_t>> rlimits;
    // --signal=SIG@TIME: signal the tasks this many seconds before the
    // time limit. Carried out by the job manager, which keeps the limit.
    struct Warning {
        int signum = 0;
        double timeleft = 0;
    };
    std::optional<Warning> signal;
    // -o pmi=pmix,simple|off: the PMI servers each task gets (both by
    // default: a task uses whichever its MPI speaks).
    bool pmix = true;
    bool pmi_simple = true;
    // --container=IMAGE: the tasks run in a container made from IMAGE
    // (doc/spec/shell.md §9), with these directories bound in besides the
    // job's own; one container per node, or one per task.
    struct ContainerMount {
        std::string source, destination;
        bool readonly = false;
    };
    std::string container_image;  // empty: no container
    std::vector<ContainerMount> container_mounts;
    bool container_per_task = false;
};

// The options under `system` (a jobspec's attributes.system). Error
// EINVAL, one line naming the option as the user gave it:
// "-o cpu-affinity=\"sometimes\": expected on, per-task or off";
// "-o bogus: unknown shell option (known: ...)".
Result<ShellOptions> read_shell_options(const nlohmann::json& system);

}  // namespace banyan
