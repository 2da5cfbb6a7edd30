// sbatch, srun and salloc: Slurm's job options translated once
// (cmd/slurm_options) and submitted by the code of banyan batch, run and
// alloc. Tasks get Slurm's SLURM_* variables (-o slurm).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>

#include <fmt/format.h>

#include "cmd/cli_util.hpp"
#include "cmd/slurm/commands.hpp"
#include "cmd/slurm_options.hpp"
#include "cmd/submit_options.hpp"

namespace banyan::cli::slurm {
namespace {

bool asks_help(const Args& args) {
    return !args.empty() && (args[0] == "--help" || args[0] == "-h" || args[0] == "--usage");
}

void print_help(const char* command, const char* usage) {
    fmt::print("Usage: {} {}\nThe options Banyan honours, with Slurm's names: banyan-slurm(7).\n", command, usage);
}

// What a front end submits: a batch job, an allocation or a plain job.
enum class Made { batch, allocation, job };

// `options` as banyan submit's, parsed into `app` over `o`: what a
// command line gave (it wins over a script's directives). For sbatch,
// `complete` is false: its options are translated again laid over the
// script's (submit_batch), which also warns about mail.
void apply(CLI::App& app, SubmitOptions& o, const SlurmOptions& options, Made made, bool complete = true) {
    add_submit_options(&app, o);
    if (made == Made::batch)
        add_array_option(&app, o.array);
    if (made != Made::job)
        add_signal_to_option(&app, o.signal_to);
    auto words = must(options.banyan_words(complete));
    std::vector<std::string> reversed(words.rbegin(), words.rend());
    app.parse(reversed);
}

// srun inside a job takes the job's sizes when not given, as Slurm's
// reads SLURM_NTASKS, SLURM_CPUS_PER_TASK and SLURM_GPUS_PER_TASK. (Not
// SLURM_NNODES: the job's instance holds just its cores, so its tasks
// land where the job's did.)
void inherit_sizes(SlurmOptions& options) {
    Args inherited;
    if (!options.has("ntasks") && !options.has("nodes") && !options.has("ntasks-per-node"))
        if (const char* v = std::getenv("SLURM_NTASKS"))
            inherited.push_back("--ntasks=" + std::string(v));
    if (!options.has("cpus-per-task"))
        if (const char* v = std::getenv("SLURM_CPUS_PER_TASK"))
            inherited.push_back("--cpus-per-task=" + std::string(v));
    if (!options.has("gpus-per-task") && !options.has("gpus") && !options.has("gres"))
        if (const char* v = std::getenv("SLURM_GPUS_PER_TASK"))
            inherited.push_back("--gpus-per-task=" + std::string(v));
    must(options.parse(inherited, SlurmCommand::srun, "the job's SLURM_* variables:"));
}

}  // namespace

int sbatch(const Args& args) {
    if (asks_help(args)) {
        print_help("sbatch", "[OPTIONS] SCRIPT [ARGS...] | --wrap=COMMAND");
        return 0;
    }
    SlurmOptions options;
    size_t used = must(options.parse(args, SlurmCommand::sbatch, ""));
    Args rest(args.begin() + static_cast<std::ptrdiff_t>(used), args.end());
    BatchScript script;
    if (options.has("wrap")) {
        if (!rest.empty())
            fail(fmt::format("--wrap and a script ({}): give one", rest.front()));
        script = {.path = "wrap", .text = "#!/bin/sh\n" + options.value("wrap") + "\n", .args = {}};
    } else if (rest.empty()) {
        // As sbatch: the script from standard input.
        std::string text{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
        if (!text.starts_with("#!"))
            fail("no script given, and standard input holds none (it must start with #!)");
        script = {.path = "sbatch", .text = std::move(text), .args = {}};
    } else {
        script = read_batch_script(rest.front());
        script.args.assign(rest.begin() + 1, rest.end());
    }
    CLI::App app("sbatch", "sbatch");
    SubmitOptions o;
    apply(app, o, options, Made::batch, false);
    JobId id = submit_batch(&app, o, script, "", BatchDefaults::slurm, false, &options).front();
    if (options.has("parsable"))
        fmt::print("{}\n", id);
    else
        fmt::print("Submitted batch job {}\n", id);
    std::fflush(stdout);
    if (!options.has("wait"))
        return 0;
    Client client = connect_to_instance();
    return wait_job(client, id, "sbatch");
}

int srun(const Args& args) {
    if (asks_help(args)) {
        print_help("srun", "[OPTIONS] COMMAND [ARGS...]");
        return 0;
    }
    SlurmOptions options;
    size_t used = must(options.parse(args, SlurmCommand::srun, ""));
    Args command(args.begin() + static_cast<std::ptrdiff_t>(used), args.end());
    if (command.empty())
        fail("no command given (srun [OPTIONS] COMMAND [ARGS...])");
    inherit_sizes(options);
    CLI::App app("srun", "srun");
    SubmitOptions o;
    apply(app, o, options, Made::job);
    nlohmann::json jobspec = build_jobspec(o, command);
    jobspec["attributes"]["system"]["shell"]["options"]["slurm"] = slurm_shell_option(0);
    return run_attached(std::move(jobspec), o, options.has("pty"));
}

int salloc(const Args& args) {
    if (asks_help(args)) {
        print_help("salloc", "[OPTIONS] [COMMAND [ARGS...]]");
        return 0;
    }
    SlurmOptions options;
    size_t used = must(options.parse(args, SlurmCommand::salloc, ""));
    Args command(args.begin() + static_cast<std::ptrdiff_t>(used), args.end());
    CLI::App app("salloc", "salloc");
    SubmitOptions o;
    apply(app, o, options, Made::allocation);
    int64_t ntasks = o.ntasks.value_or(o.nodes.value_or(1));
    nlohmann::json jobspec = allocation_jobspec(o, command);
    jobspec["attributes"]["system"]["shell"]["options"]["slurm"] = slurm_shell_option(ntasks);
    return run_attached(std::move(jobspec), o, isatty(STDIN_FILENO) && command.empty());
}

}  // namespace banyan::cli::slurm
