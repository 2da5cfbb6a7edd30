// JobRequest: what a user asks for in the words of `banyan submit`'s
// options and of POST /api/v1/jobs's fields, and the one place where that
// becomes a jobspec (version 1, doc/spec/jobspec.md): nodes, tasks, slots
// and counts, the system attributes, the umask and the limits. The
// front ends read their own input into a JobRequest; what only one of
// them has (the CLI's -S, -o, --output) they add to the jobspec after.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include <nlohmann/json.hpp>

#include "core/function_ref.hpp"
#include "core/result.hpp"

namespace banyan {

struct JobRequest {
    std::vector<std::string> command;
    std::optional<int64_t> nodes;   // unset: the tasks go where they fit (one node with `exclusive`)
    std::optional<int64_t> ntasks;  // unset: one per node, or 1
    int64_t cores_per_task = 1;
    int64_t gpus_per_task = 0;
    // Memory in bytes (Slurm's --mem and --mem-per-cpu): on each node, or
    // for each core; at most one of them. Per node without a node count:
    // the job runs on one node.
    std::optional<uint64_t> memory_per_node;
    std::optional<uint64_t> memory_per_core;
    bool exclusive = false;            // whole nodes
    bool requeue = false;              // back to pending after a node failure, rather than failed
    std::optional<double> reattach_timeout;  // seconds a lost node is waited for; unset: the instance's
    std::optional<double> time_limit;  // seconds
    std::string name;                  // shown by banyan jobs; empty: the command
    std::string queue;                 // empty: the default queue
    std::string reservation;           // an advance reservation to run in (doc/spec/reservations.md)
    std::string array;                 // --array: a job array's indexes and throttle (doc/spec/arrays.md)
    std::string bank;                  // empty: the user's default bank (accounting.md §5)
    std::string cwd;                   // the tasks' working directory
    std::map<std::string, std::string> environment;
    mode_t umask = 022;  // for the files the job makes
    // Resource limits the tasks start with, by kRlimitNames' names:
    // a number, or "unlimited".
    std::map<std::string, nlohmann::json> rlimits;
    nlohmann::json dependencies = nlohmann::json::array();  // RFC 26 entries
    std::optional<nlohmann::json> constraint;               // RFC 31
};

// The fields of a JobRequest that build_jobspec() checks, for its errors.
enum class JobField { command, nodes, ntasks, cores_per_task, gpus_per_task, memory, time_limit, environment };

// How a front end names a field in an error ("-N 4" for the CLI, "nodes"
// for REST): an error reads "NAME: what is wrong".
using FieldName = FunctionRef<std::string(JobField)>;

// The jobspec of `r`. Error EINVAL, naming the field by `name_of`: no
// command, a count below 1 (GPUs below 0), fewer tasks than nodes, memory
// both per node and per core, a time limit not above 0, an environment
// name that is empty or has '='.
Result<nlohmann::json> build_jobspec(const JobRequest& r, FieldName name_of);

}  // namespace banyan
