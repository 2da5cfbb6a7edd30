// The options `banyan submit` and `banyan run` share, and the jobspec
// (version 1, doc/spec/jobspec.md) they make from them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/jobid.hpp"

namespace banyan::cli {

class SlurmOptions;

struct SubmitOptions {
    std::optional<int64_t> nodes;
    std::optional<int64_t> ntasks;
    int64_t cores_per_task = 1;
    int64_t gpus_per_task = 0;
    std::string memory;          // --mem: on each node
    std::string memory_per_cpu;  // --mem-per-cpu
    std::string time_limit;
    bool exclusive = false;
    int64_t urgency = 16;
    std::vector<std::string> dependencies;
    std::string begin_time;
    std::string signal;  // SIG@TIME
    std::string job_name;
    std::string output;
    std::string error;
    std::string input;
    bool label_io = false;
    bool requeue = false;
    std::string reattach_timeout;  // DURATION
    std::vector<std::string> env;
    std::string cwd;
    std::vector<std::string> setattr;
    std::vector<std::string> setopt;
    std::vector<std::string> requirements;  // --requires, each a constraint query (joined by and)
    std::string queue;
    std::string reservation;
    std::string bank;
    std::string array;  // --array (submit and batch only)
    std::string signal_to;  // --signal-to (batch and alloc: where the instance passes SIGUSR1 on)
    std::string container;                     // --container=IMAGE
    std::vector<std::string> container_mounts;  // --container-mount=SRC:DST[:ro]
    std::string profile_ebpf;                   // --profile-ebpf=LIST[:optional]
    double profile_ebpf_interval = 0;           // --profile-ebpf-interval=SECONDS; 0: the default
};

void add_submit_options(CLI::App* cmd, SubmitOptions& o);

// The jobspec for COMMAND. Fails (cli::fail) with a line naming the option
// that is wrong.
nlohmann::json build_jobspec(const SubmitOptions& o, const std::vector<std::string>& command);

// The jobspec of a nested instance whose rank 0 runs COMMAND (default:
// the user's shell): banyan alloc, salloc.
nlohmann::json allocation_jobspec(SubmitOptions& o, std::vector<std::string> command);

// Submits `jobspec` and streams its output as `banyan run` does: this
// command's stdin goes to task 0 (unless --input), Ctrl-C to the tasks;
// with `pty`, task 0 runs on a terminal of its own. Returns the job's exit
// code. Fails (cli::fail) with one line.
int run_attached(nlohmann::json jobspec, const SubmitOptions& o, bool pty);

// --array (submit and batch, and #BANYAN --array).
void add_array_option(CLI::App* cmd, std::string& array);
// --signal-to (batch and alloc, and #BANYAN --signal-to).
void add_signal_to_option(CLI::App* cmd, std::string& signal_to);

// A batch script (banyan batch, sbatch), read and checked: #! first, no
// DOS line breaks. Fails naming the file.
struct BatchScript {
    std::string path;
    std::string text;
    std::vector<std::string> args;
};
BatchScript read_batch_script(const std::string& path);

// Whose defaults a batch job gets: Banyan's (banyan-ID.out), or sbatch's
// (slurm-ID.out, slurm-A_I.out for an array; Slurm's variables in its tasks).
enum class BatchDefaults { banyan, slurm };

// Submits `script` as a batch job: `cmd`'s options as its command line gave
// them, the script's directives under them (doc/spec/slurm.md §1); with
// `cc`, a copy per index. Prints each id as it is accepted with `print`.
// Returns the ids. Fails (cli::fail) with one line.
// `slurm_command_line`: sbatch's options, laid over the script's #SBATCH
// lines before they are translated (what its command line gave but
// translates to no word, as --no-requeue, still wins).
std::vector<JobId> submit_batch(CLI::App* cmd, SubmitOptions& o, const BatchScript& script, const std::string& cc,
                                BatchDefaults defaults, bool print, const SlurmOptions* slurm_command_line = nullptr);

// The shell option `slurm` (doc/spec/slurm.md §6): the directory it was
// submitted from (SLURM_SUBMIT_DIR) and, for a job whose tasks are its
// instance's brokers, the task count it asked for (0: none given).
nlohmann::json slurm_shell_option(int64_t ntasks);

}  // namespace banyan::cli
