// The Slurm front ends of banyan-slurm (doc/spec/slurm.md §5), one
// function a command: each takes the words after the command's name and
// returns its exit status; errors are cli::Failure, which main prints as
// Slurm does ("sbatch: error: ...").
#pragma once

#include <string>
#include <vector>

namespace banyan::cli::slurm {

using Args = std::vector<std::string>;

int sbatch(const Args& args);
int srun(const Args& args);
int salloc(const Args& args);
int squeue(const Args& args);
int scancel(const Args& args);
int sacct(const Args& args);
int scontrol(const Args& args);
int sinfo(const Args& args);
int sacctmgr(const Args& args);

}  // namespace banyan::cli::slurm
