// banyan-slurm: Slurm's command names over Banyan's client code
// (doc/spec/slurm.md §5). One program, installed under each name
// (sbatch, squeue, ...); `banyan-slurm NAME ARGS...` runs one by name.
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <CLI/CLI.hpp>

#include "cmd/cli_util.hpp"
#include "cmd/slurm/commands.hpp"

using namespace banyan::cli;

int main(int argc, char** argv) {
    const std::pair<const char*, int (*)(const slurm::Args&)> commands[] = {
        {"sbatch", slurm::sbatch},     {"srun", slurm::srun},   {"salloc", slurm::salloc},
        {"squeue", slurm::squeue},     {"scancel", slurm::scancel}, {"sacct", slurm::sacct},
        {"scontrol", slurm::scontrol}, {"sinfo", slurm::sinfo}, {"sacctmgr", slurm::sacctmgr},
    };
    std::string name = std::filesystem::path(argv[0]).filename().string();
    slurm::Args args(argv + 1, argv + argc);
    if (name == "banyan-slurm") {
        if (args.empty() || args[0].starts_with("-")) {
            std::fprintf(stderr,
                         "usage: banyan-slurm COMMAND [ARGS...]: sbatch, srun, salloc, squeue, scancel, sacct, "
                         "scontrol, sinfo, sacctmgr (see banyan-slurm(7))\n");
            return args.empty() ? 2 : 0;
        }
        name = args[0];
        args.erase(args.begin());
    }
    for (const auto& [command, run] : commands) {
        if (name != command)
            continue;
        try {
            return run(args);
        } catch (const CLI::CallForHelp& e) {
            return 0;  // printed by the command (print_help)
        } catch (const CLI::ParseError& e) {
            std::fprintf(stderr, "%s: error: %s\n", command, e.what());
            return 1;
        } catch (const Failure& f) {
            std::fprintf(stderr, "%s: error: %s\n", command, f.message.c_str());
            return f.exit_code;
        } catch (const std::exception& e) {
            std::fprintf(stderr, "%s: error: unexpected reply from the instance: %s\n", command, e.what());
            return 1;
        }
    }
    std::fprintf(stderr, "banyan-slurm: '%s' is not a Slurm command it offers (see banyan-slurm(7))\n",
                 name.c_str());
    return 2;
}
