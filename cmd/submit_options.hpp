// The options `banyan submit` and `banyan run` share, and the jobspec
// (version 1, doc/spec/jobspec.md) they make from them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

namespace banyan::cli {

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
    std::vector<std::string> env;
    std::string cwd;
    std::vector<std::string> setattr;
    std::vector<std::string> setopt;
    std::vector<std::string> requirements;  // --requires, each a constraint query (joined by and)
    std::string queue;
    std::string reservation;
    std::string bank;
    std::string array;  // --array (submit and batch only)
};

void add_submit_options(CLI::App* cmd, SubmitOptions& o);

// The jobspec for COMMAND. Fails (cli::fail) with a line naming the option
// that is wrong.
nlohmann::json build_jobspec(const SubmitOptions& o, const std::vector<std::string>& command);

}  // namespace banyan::cli
