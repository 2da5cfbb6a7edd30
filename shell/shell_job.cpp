#include "shell/shell_job.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/json_field.hpp"
#include "core/text.hpp"
#include "sched/jobspec.hpp"

namespace banyan {

std::string expand_output_template(std::string path, JobId id, uint32_t task, const std::string& node) {
    path = replace_all(std::move(path), "{{id}}", format_jobid(id));
    path = replace_all(std::move(path), "{{taskid}}", std::to_string(task));
    return replace_all(std::move(path), "{{node}}", node);
}

std::string ShellJob::host_of(uint32_t broker_rank) const {
    size_t i = 0;
    for (const auto& [rank, children] : R.ranks) {
        if (rank == broker_rank && i < R.nodelist.size())
            return R.nodelist[i];
        i++;
    }
    return fmt::format("rank{}", broker_rank);
}

namespace {

// Set by the shell for each task: a submitter's own (from inside another
// job, or a nested instance's broker) would shadow them.
bool is_launcher_variable(std::string_view name) {
    return name.starts_with("BANYAN_") || name.starts_with("PMIX_") || name.starts_with("PMI_");
}

// How many of `type` each slot has (-c, -g), found where the slot is in
// the tree; nullopt when there is no slot.
std::optional<uint64_t> per_slot(const std::vector<JobspecResource>& resources, std::string_view type) {
    for (const auto& r : resources) {
        if (r.type == "slot") {
            for (const auto& w : r.with)
                if (w.type == type)
                    return w.count.min;
            return 0;
        }
        if (auto n = per_slot(r.with, type))
            return n;
    }
    return std::nullopt;
}

}  // namespace

Result<ShellJob> ShellJob::parse(const nlohmann::json& m) {
    ShellJob job;
    auto id = json_field<uint64_t>(m, "id", 0, "shell");
    auto rank = json_field<uint32_t>(m, "rank", 0, "shell");
    auto uri = json_field<std::string>(m, "uri", "", "shell");
    auto tmpdir = json_field<std::string>(m, "tmpdir", "", "shell");
    auto topology = json_field<std::string>(m, "topology", "", "shell");
    auto host_brokers = json_field<uint32_t>(m, "host_brokers", 1, "shell");
    auto cache = json_field<std::string>(m, "container_cache", "", "shell");
    auto cache_size = json_field<uint64_t>(m, "container_cache_size", 0, "shell");
    if (auto e = first_error(id, rank, uri, tmpdir, topology, host_brokers, cache, cache_size))
        return *e;
    job.container_cache = *cache;
    job.container_cache_size = *cache_size;
    job.host_brokers = std::max<uint32_t>(*host_brokers, 1);
    job.id = *id;
    job.rank = *rank;
    job.uri = *uri;
    job.tmpdir = *tmpdir;
    job.topology = *topology;
    if (!m.contains("jobspec") || !m["jobspec"].is_object())
        return make_error(EPROTO, "shell: expected a jobspec");
    auto spec = Jobspec::from_json(m["jobspec"]);
    if (!spec)
        return spec.error();
    auto R = Rv1::from_json(m.contains("R") ? m["R"] : nlohmann::json());
    if (!R)
        return R.error();
    job.R = std::move(*R);
    job.nnodes = static_cast<uint32_t>(job.R.ranks.size());
    auto map = TaskMap::compute(*spec, job.R);
    if (!map)
        return map.error();
    job.map = std::move(*map);
    const TaskMap::Block* local = job.map.find(job.rank);
    if (!local)
        return make_error(EINVAL, fmt::format("R holds no resources on rank {}", job.rank));
    job.local = *local;
    job.command = spec->tasks[0].command;
    job.cores_per_task = std::max<uint64_t>(per_slot(spec->resources, "core").value_or(1), 1);
    job.gpus_per_task = per_slot(spec->resources, "gpu").value_or(0);
    if (job.command.empty())
        return make_error(EINVAL, "jobspec: tasks[0].command: empty");
    const auto& system = json_object_at(m["jobspec"], {"attributes", "system"});
    if (system.contains("environment") && system["environment"].is_object()) {
        for (const auto& [k, v] : system["environment"].items())
            if (v.is_string() && !is_launcher_variable(k))
                job.environment.push_back(k + "=" + v.get<std::string>());
    } else {
        for (char** e = environ; *e; e++)
            if (!is_launcher_variable(*e))
                job.environment.emplace_back(*e);
    }
    if (system.contains("cwd") && system["cwd"].is_string())
        job.cwd = system["cwd"].get<std::string>();
    // Any name the job manager took (it shows a non-string as it is).
    job.name = json_field<std::string>(json_object_at(system, {"job"}), "name", "").value_or("");
    auto options = read_shell_options(system);
    if (!options)
        return options.error();
    job.options = std::move(*options);
    if (m.contains("array"))
        if (auto r = job.set_array_element(json_object_at(m, {"array"})); !r)
            return r.error();
    return job;
}

// An element of a job array (doc/spec/arrays.md §3): its index in the
// environment, Banyan's names and Slurm's, and in the command and file
// names where {{array_id}} and {{array_index}} stand.
Result<void> ShellJob::set_array_element(const nlohmann::json& array) {
    auto id = json_field<uint64_t>(array, "id", 0, "shell.array");
    auto index = json_field<uint32_t>(array, "index", 0, "shell.array");
    auto size = json_field<uint64_t>(array, "size", 0, "shell.array");
    if (auto e = first_error(id, index, size))
        return *e;
    std::string array_id = format_jobid(*id), array_index = std::to_string(*index);
    for (std::string* text : {&options.stdout_path, &options.stderr_path}) {
        *text = replace_all(std::move(*text), "{{array_id.dec}}", std::to_string(*id));
        *text = replace_all(replace_all(std::move(*text), "{{array_id}}", array_id), "{{array_index}}", array_index);
    }
    for (auto& arg : command)
        arg = replace_all(replace_all(std::move(arg), "{{array_id}}", array_id), "{{array_index}}", array_index);
    // Slurm's, for scripts brought from it: its array job id is a number.
    for (std::string_view prefix : {"SLURM_ARRAY_", "BANYAN_ARRAY_"})
        std::erase_if(environment, [prefix](const std::string& kv) { return kv.starts_with(prefix); });
    environment.push_back("BANYAN_ARRAY_JOB_ID=" + array_id);
    environment.push_back("BANYAN_ARRAY_INDEX=" + array_index);
    environment.push_back(fmt::format("BANYAN_ARRAY_COUNT={}", *size));
    environment.push_back(fmt::format("SLURM_ARRAY_JOB_ID={}", *id));
    environment.push_back("SLURM_ARRAY_TASK_ID=" + array_index);
    environment.push_back(fmt::format("SLURM_ARRAY_TASK_COUNT={}", *size));
    return {};
}

void ShellJob::expand_job_templates(const std::string& user) {
    for (std::string* text : {&options.stdout_path, &options.stderr_path}) {
        *text = replace_all(std::move(*text), "{{array_id.dec}}", std::to_string(id));  // not an element
        if (options.slurm)  // Slurm's %a outside an array; a Banyan job's {{array_index}} stays as written
            *text = replace_all(std::move(*text), "{{array_index}}", "4294967294");
        *text = replace_all(std::move(*text), "{{id.dec}}", std::to_string(id));
        *text = replace_all(std::move(*text), "{{name}}", name);
        *text = replace_all(std::move(*text), "{{user}}", user);
    }
}

std::vector<std::string> ShellJob::slurm_environment(uint32_t task_rank, uint32_t local_id, size_t cores_here) const {
    uint32_t node_index = 0;
    for (const auto& [r, children] : R.ranks) {
        if (r == rank)
            break;
        node_index++;
    }
    uint64_t ntasks = options.slurm_ntasks > 0 ? options.slurm_ntasks : map.ntasks;
    std::string nodelist = R.nodelist.size() > 0 ? R.nodelist.format() : R.rank_set().format();
    // Not Slurm's older names SLURM_JOBID and SLURM_NODELIST: with both
    // set, Open MPI takes itself for srun-launched and ignores PMIx (every
    // rank a singleton).
    std::vector<std::string> env = {
        fmt::format("SLURM_JOB_ID={}", id),
        "SLURM_JOB_NAME=" + name,
        fmt::format("SLURM_NTASKS={}", ntasks),
        fmt::format("SLURM_NPROCS={}", ntasks),
        fmt::format("SLURM_CPUS_PER_TASK={}", cores_per_task),
        "SLURM_JOB_NODELIST=" + nodelist,
        fmt::format("SLURM_JOB_NUM_NODES={}", nnodes),
        fmt::format("SLURM_NNODES={}", nnodes),
        "SLURM_SUBMIT_DIR=" + (options.slurm_submit_dir.empty() ? cwd : options.slurm_submit_dir),
        fmt::format("SLURM_PROCID={}", task_rank),
        fmt::format("SLURM_LOCALID={}", local_id),
        fmt::format("SLURM_NODEID={}", node_index),
        fmt::format("SLURM_CPUS_ON_NODE={}", cores_here),
        "SLURMD_NODENAME=" + host_of(rank),
    };
    if (gpus_per_task > 0)  // srun inside the job reads it, as Slurm's does
        env.push_back(fmt::format("SLURM_GPUS_PER_TASK={}", gpus_per_task));
    return env;
}

}  // namespace banyan
