#include "shell/shell_job.hpp"

#include <fmt/format.h>

#include "core/duration.hpp"
#include "core/json_field.hpp"
#include "core/rlimits.hpp"
#include "core/text.hpp"
#include "sched/jobspec.hpp"

namespace banyan {
namespace {

Result<Affinity> affinity(const nlohmann::json& options, const char* key) {
    auto it = options.find(key);
    if (it == options.end())
        return Affinity::on;
    std::string v = it->is_string() ? it->get<std::string>() : it->is_boolean() ? (it->get<bool>() ? "on" : "off")
                                                             : it->is_number()  ? (it->get<double>() != 0 ? "on" : "off")
                                                                                : "";
    if (v == "on")
        return Affinity::on;
    if (v == "per-task")
        return Affinity::per_task;
    if (v == "off")
        return Affinity::off;
    return make_error(EINVAL, fmt::format("-o {}={}: expected on, per-task or off", key, it->dump()));
}

Result<std::optional<double>> exit_timeout(const nlohmann::json& options) {
    auto it = options.find("exit-timeout");
    if (it == options.end())
        return std::optional<double>(30.0);
    if (it->is_string() && it->get<std::string>() == "none")
        return std::optional<double>();
    Result<double> seconds = it->is_number() ? Result<double>(it->get<double>())
                             : it->is_string()
                                 ? parse_duration(it->get<std::string>(), BareNumber::seconds)
                                 : Result<double>(make_error(EINVAL, "expected a duration"));
    if (!seconds || *seconds <= 0)
        return make_error(EINVAL, fmt::format("-o exit-timeout={}: expected a duration like 30s, or none", it->dump()));
    return std::optional<double>(*seconds);
}

Result<std::vector<std::pair<int, rlim_t>>> rlimits(const nlohmann::json& options) {
    std::vector<std::pair<int, rlim_t>> out;
    const auto& limits = json_object_at(options, {"rlimit"});
    for (const auto& [name, value] : limits.items()) {
        auto known = std::find_if(kRlimitNames.begin(), kRlimitNames.end(), [&](const auto& r) { return name == r.name; });
        if (known == kRlimitNames.end())
            return make_error(EINVAL, fmt::format("-o rlimit.{}: unknown limit (as, core, cpu, data, fsize, memlock, "
                                                  "nofile, nproc, stack, rss)",
                                                  name));
        if (value.is_string() && value.get<std::string>() == "unlimited")
            out.emplace_back(known->resource, RLIM_INFINITY);
        else if (value.is_number_integer() && value.get<int64_t>() >= 0)
            out.emplace_back(known->resource, static_cast<rlim_t>(value.get<int64_t>()));
        else
            return make_error(EINVAL, fmt::format("-o rlimit.{}={}: expected a number or unlimited", name, value.dump()));
    }
    return out;
}

std::string output_path(const nlohmann::json& options, const char* stream) {
    const auto& s = json_object_at(options, {"output", stream});
    return s.contains("path") && s["path"].is_string() ? s["path"].get<std::string>() : "";
}

Result<ShellOptions> shell_options(const nlohmann::json& system) {
    const auto& o = json_object_at(system, {"shell", "options"});
    ShellOptions opts;
    auto cpu = affinity(o, "cpu-affinity");
    auto gpu = affinity(o, "gpu-affinity");
    auto timeout = exit_timeout(o);
    auto limits = rlimits(o);
    if (!cpu || !gpu || !timeout || !limits)
        return (!cpu ? cpu.error() : !gpu ? gpu.error() : !timeout ? timeout.error() : limits.error());
    opts.cpu_affinity = *cpu;
    opts.gpu_affinity = *gpu;
    opts.exit_timeout = *timeout;
    opts.rlimits = std::move(*limits);
    opts.stdout_path = output_path(o, "stdout");
    opts.stderr_path = output_path(o, "stderr");
    const auto& output = json_object_at(o, {"output"});
    opts.label = output.contains("label") && output["label"] != false && output["label"] != 0;
    const auto& input = json_object_at(o, {"input", "stdin"});
    if (input.contains("path") && input["path"].is_string())
        opts.input_path = input["path"].get<std::string>();
    opts.forward_stdin = o.contains("stdin") && o["stdin"] == "forward";
    return opts;
}

}  // namespace

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

Result<ShellJob> ShellJob::parse(const nlohmann::json& m) {
    ShellJob job;
    auto id = json_field<uint64_t>(m, "id", 0, "shell");
    auto rank = json_field<uint32_t>(m, "rank", 0, "shell");
    auto uri = json_field<std::string>(m, "uri", "", "shell");
    auto tmpdir = json_field<std::string>(m, "tmpdir", "", "shell");
    auto topology = json_field<std::string>(m, "topology", "", "shell");
    if (!id || !rank || !uri || !tmpdir || !topology)
        return (!id ? id.error() : !rank ? rank.error() : !uri ? uri.error() : !tmpdir ? tmpdir.error() : topology.error());
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
    auto R = Rv1::from_json(m.value("R", nlohmann::json()));
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
    if (job.command.empty())
        return make_error(EINVAL, "jobspec: tasks[0].command: empty");
    const auto& system = json_object_at(m["jobspec"], {"attributes", "system"});
    if (system.contains("environment") && system["environment"].is_object()) {
        for (const auto& [k, v] : system["environment"].items())
            if (v.is_string() && !k.starts_with("BANYAN_") && !k.starts_with("PMIX_"))
                job.environment.push_back(k + "=" + v.get<std::string>());
    } else {
        for (char** e = environ; *e; e++)
            if (!std::string_view(*e).starts_with("BANYAN_") && !std::string_view(*e).starts_with("PMIX_"))
                job.environment.emplace_back(*e);
    }
    if (system.contains("cwd") && system["cwd"].is_string())
        job.cwd = system["cwd"].get<std::string>();
    auto options = shell_options(system);
    if (!options)
        return options.error();
    job.options = std::move(*options);
    return job;
}

}  // namespace banyan
