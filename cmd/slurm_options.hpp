// Slurm's job options, as #SBATCH lines and sbatch/srun/salloc take them,
// translated into `banyan submit`'s (doc/spec/slurm.md §2-§4). One
// translation for the directives of `banyan batch` and for the
// banyan-slurm front ends: nothing about a job is read twice.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/result.hpp"

namespace banyan::cli {

// Which command's options: a script's #SBATCH lines take sbatch's, less
// those that only make sense on a command line (--wrap, --parsable).
enum class SlurmCommand { directive, sbatch, srun, salloc };

class SlurmOptions {
  public:
    // Reads options from `words`, up to the first word that is not one
    // (returned: its index; words.size() when all are). Among options of
    // one name the last wins; --export and --dependency add. `where`
    // starts each error ("job.sh:7: #SBATCH"; empty on a command line),
    // which names the option as written and what is wrong.
    Result<size_t> parse(const std::vector<std::string>& words, SlurmCommand command, const std::string& where);

    // The options given, as `banyan submit` option words (--nodes=4 ...).
    // Errors name the line of the option they are about. Not `complete`:
    // these options are laid over others later (sbatch's command line
    // over its script's lines, overlay()), so nothing is made up from
    // what is missing: no task a node by default, and --ntasks-per-node
    // waits for the node count.
    Result<std::vector<std::string>> banyan_words(bool complete = true) const;

    bool empty() const { return given_.empty(); }
    bool has(const std::string& name) const { return given_.count(name) > 0; }
    // The last value of option `name` (its long name); "" when not given.
    std::string value(const std::string& name) const;

    // Lays `above`'s options over these: each option `above` gives
    // replaces this one's of the same name (the command line over a
    // script's #SBATCH lines, before either is translated).
    void overlay(const SlurmOptions& above);

  private:
    bool instance_ = false;  // options of a job that is an instance (a directive, sbatch, salloc)
    struct Given {
        std::vector<std::string> values;  // one, or each of a list option's
        std::string where;                // "job.sh:7: #SBATCH --nodes=4"
    };
    std::map<std::string, Given> given_;  // by long name
};

// Slurm's filename pattern (sbatch(1), "filename pattern") as the shell's
// output templates: %j the job id, %x the name, %u the user, %A and %a the
// array's id and index, %N the host, %t the task rank, %% a '%'. Outside
// an array the shell makes %A the job's id and %a Slurm's NO_VAL,
// 4294967294, as Slurm does. Error names the field it cannot honour.
Result<std::string> slurm_filename(const std::string& pattern);

// A time as Slurm's -t takes it (MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM,
// D-HH:MM:SS), in seconds; 0 for UNLIMITED or INFINITE.
Result<uint64_t> slurm_minutes_time(const std::string& text);


}  // namespace banyan::cli
