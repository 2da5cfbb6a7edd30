#include "sched/job_request.hpp"

#include <fmt/format.h>

namespace banyan {

namespace {

Result<void> check(const JobRequest& r, FieldName name_of) {
    auto wrong = [&](JobField f, std::string what) {
        return make_error(EINVAL, fmt::format("{}: {}", name_of(f), what));
    };
    if (r.command.empty())
        return wrong(JobField::command, "the command is empty");
    if (r.nodes && *r.nodes < 1)
        return wrong(JobField::nodes, "node count must be at least 1");
    if (r.ntasks && *r.ntasks < 1)
        return wrong(JobField::ntasks, "task count must be at least 1");
    if (r.cores_per_task < 1)
        return wrong(JobField::cores_per_task, "cores per task must be at least 1");
    if (r.gpus_per_task < 0)
        return wrong(JobField::gpus_per_task, "GPUs per task cannot be negative");
    if (r.memory_per_node && r.memory_per_core)
        return wrong(JobField::memory, "give memory per node or per core, not both");
    if (r.memory_per_node == 0u || r.memory_per_core == 0u)
        return wrong(JobField::memory, "memory must be more than 0");
    if (r.memory_per_core && r.cores_per_task >= 1 &&
        *r.memory_per_core > (uint64_t{1} << 60) / static_cast<uint64_t>(r.cores_per_task))
        return wrong(JobField::memory, "over 1 EiB a task");
    if (r.nodes && r.ntasks && *r.ntasks < *r.nodes)
        return wrong(JobField::ntasks, fmt::format("fewer tasks than nodes ({})", *r.nodes));
    if (r.time_limit && !(*r.time_limit > 0))
        return wrong(JobField::time_limit, "a time limit must be more than 0");
    for (const auto& [name, value] : r.environment)
        if (name.empty() || name.find('=') != std::string::npos)
            return wrong(JobField::environment, fmt::format("'{}' is not a variable name", name));
    return {};
}

}  // namespace

Result<nlohmann::json> build_jobspec(const JobRequest& r, FieldName name_of) {
    if (auto ok = check(r, name_of); !ok)
        return ok.error();
    int64_t ntasks = r.ntasks.value_or(r.nodes.value_or(1));
    // Exclusive or memory per node without a node count, as Slurm users
    // ask for them: the tasks on one node (the job's alone with exclusive).
    std::optional<int64_t> nodes =
        r.nodes ? r.nodes : r.exclusive || r.memory_per_node ? std::optional<int64_t>(1) : std::nullopt;
    // As many slots on each node as the fullest needs; where the tasks do
    // not divide evenly, the task count says how many run.
    int64_t per_node = nodes ? (ntasks + *nodes - 1) / *nodes : 1;
    nlohmann::json per_task = nlohmann::json::array({{{"type", "core"}, {"count", r.cores_per_task}}});
    if (r.gpus_per_task > 0)
        per_task.push_back({{"type", "gpu"}, {"count", r.gpus_per_task}});
    // Memory in MiB, the graph's unit (resources.md §4), rounded up: per
    // node, shared among the node's slots.
    constexpr uint64_t kMiB = uint64_t{1} << 20;
    if (r.memory_per_core || r.memory_per_node) {
        uint64_t mib = r.memory_per_core
                           ? (*r.memory_per_core + kMiB - 1) / kMiB * static_cast<uint64_t>(r.cores_per_task)
                           : ((*r.memory_per_node + kMiB - 1) / kMiB + static_cast<uint64_t>(per_node) - 1) /
                                 static_cast<uint64_t>(per_node);
        per_task.push_back({{"type", "memory"}, {"count", mib}, {"unit", "MiB"}});
    }
    nlohmann::json count{{"per_slot", 1}};
    nlohmann::json resources;
    if (nodes) {
        if (ntasks % *nodes != 0)
            count = {{"total", ntasks}};
        nlohmann::json node{{"type", "node"},
                            {"count", *nodes},
                            {"with", {{{"type", "slot"}, {"count", per_node}, {"label", "task"}, {"with", per_task}}}}};
        if (r.exclusive)
            node["exclusive"] = true;
        resources = nlohmann::json::array({node});
    } else {
        resources =
            nlohmann::json::array({{{"type", "slot"}, {"count", ntasks}, {"label", "task"}, {"with", per_task}}});
    }
    nlohmann::json system{{"duration", r.time_limit.value_or(0)},
                          {"cwd", r.cwd},
                          {"environment", r.environment},
                          {"umask", fmt::format("{:04o}", r.umask & 0777)}};
    if (!r.name.empty())
        system["job"] = {{"name", r.name}};
    if (!r.dependencies.empty())
        system["dependencies"] = r.dependencies;
    if (!r.queue.empty())
        system["queue"] = r.queue;
    if (!r.reservation.empty())
        system["reservation"] = r.reservation;
    if (!r.array.empty())
        system["array"] = r.array;
    if (!r.bank.empty())
        system["bank"] = r.bank;
    if (r.constraint)
        system["constraints"] = *r.constraint;
    if (r.requeue)
        system["requeue"] = true;
    if (r.reattach_timeout)
        system["reattach-timeout"] = *r.reattach_timeout;
    if (!r.rlimits.empty())
        system["shell"]["options"]["rlimit"] = r.rlimits;
    return nlohmann::json{{"version", 1},
                          {"resources", std::move(resources)},
                          {"tasks", {{{"command", r.command}, {"slot", "task"}, {"count", std::move(count)}}}},
                          {"attributes", {{"system", std::move(system)}}}};
}

}  // namespace banyan
