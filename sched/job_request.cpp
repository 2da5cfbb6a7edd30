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
    nlohmann::json per_task = nlohmann::json::array({{{"type", "core"}, {"count", r.cores_per_task}}});
    if (r.gpus_per_task > 0)
        per_task.push_back({{"type", "gpu"}, {"count", r.gpus_per_task}});
    nlohmann::json count{{"per_slot", 1}};
    nlohmann::json resources;
    // Exclusive without a node count, as Slurm users ask for it: the tasks
    // on one node that is the job's alone.
    std::optional<int64_t> nodes = r.nodes ? r.nodes : r.exclusive ? std::optional<int64_t>(1) : std::nullopt;
    if (nodes) {
        // As many slots on each node as the fullest needs; where the tasks
        // do not divide evenly, the task count says how many run.
        int64_t per_node = (ntasks + *nodes - 1) / *nodes;
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
    if (!r.bank.empty())
        system["bank"] = r.bank;
    if (r.constraint)
        system["constraints"] = *r.constraint;
    if (!r.rlimits.empty())
        system["shell"]["options"]["rlimit"] = r.rlimits;
    return nlohmann::json{{"version", 1},
                          {"resources", std::move(resources)},
                          {"tasks", {{{"command", r.command}, {"slot", "task"}, {"count", std::move(count)}}}},
                          {"attributes", {{"system", std::move(system)}}}};
}

}  // namespace banyan
