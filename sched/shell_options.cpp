#include "sched/shell_options.hpp"

#include <algorithm>
#include <csignal>

#include <fmt/format.h>

#include "core/duration.hpp"
#include "core/json_field.hpp"
#include "core/rlimits.hpp"

namespace banyan {
namespace {

// What `-o NAME=...` may name (the CLI sets output, input and stdin from
// its own options).
constexpr std::string_view kKnownOptions[] = {"cpu-affinity", "gpu-affinity", "exit-timeout", "rlimit",
                                              "output",       "input",        "stdin",        "signal",
                                              "profile",      "pmi",          "pty",          "slurm",
                                              "container",    "container-per-task"};

Result<Affinity> affinity(const nlohmann::json& options, const char* key) {
    auto it = options.find(key);
    if (it == options.end())
        return Affinity::on;
    std::string v = it->is_string()    ? it->get<std::string>()
                    : it->is_boolean() ? (it->get<bool>() ? "on" : "off")
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
    Result<double> seconds = it->is_number()   ? Result<double>(it->get<double>())
                             : it->is_string() ? parse_duration(it->get<std::string>(), BareNumber::seconds)
                                               : Result<double>(make_error(EINVAL, "expected a duration"));
    if (!seconds || *seconds <= 0)
        return make_error(EINVAL, fmt::format("-o exit-timeout={}: expected a duration like 30s, or none", it->dump()));
    return std::optional<double>(*seconds);
}

// {"signum": N, "timeleft": SECONDS}, as Flux's shell option.
Result<std::optional<ShellOptions::Warning>> warning_signal(const nlohmann::json& options) {
    auto it = options.find("signal");
    if (it == options.end())
        return std::optional<ShellOptions::Warning>();
    auto signum = json_field<int64_t>(*it, "signum", 0, "-o signal");
    auto timeleft = json_field<double>(*it, "timeleft", -1, "-o signal");
    if (!it->is_object() || !signum || !timeleft || *signum < 1 || *signum >= NSIG || *timeleft < 0)
        return make_error(EINVAL, fmt::format("-o signal={}: expected {{\"signum\": 1-{}, \"timeleft\": SECONDS}}",
                                              it->dump(), NSIG - 1));
    return std::optional<ShellOptions::Warning>(ShellOptions::Warning{static_cast<int>(*signum), *timeleft});
}

Result<std::vector<std::pair<int, rlim_t>>> rlimits(const nlohmann::json& options) {
    std::vector<std::pair<int, rlim_t>> out;
    const auto& limits = json_object_at(options, {"rlimit"});
    for (const auto& [name, value] : limits.items()) {
        const std::string& key = name;  // (clang 14 cannot capture a structured binding)
        auto known =
            std::find_if(kRlimitNames.begin(), kRlimitNames.end(), [&](const auto& r) { return key == r.name; });
        if (known == kRlimitNames.end())
            return make_error(EINVAL, fmt::format("-o rlimit.{}: unknown limit (as, core, cpu, data, fsize, memlock, "
                                                  "nofile, nproc, stack, rss)",
                                                  name));
        if (value.is_string() && value.get<std::string>() == "unlimited")
            out.emplace_back(known->resource, RLIM_INFINITY);
        else if (value.is_number_integer() && value.get<int64_t>() >= 0)
            out.emplace_back(known->resource, static_cast<rlim_t>(value.get<int64_t>()));
        else
            return make_error(EINVAL,
                              fmt::format("-o rlimit.{}={}: expected a number or unlimited", name, value.dump()));
    }
    return out;
}

// A path the container binds: absolute, and nothing to resolve.
bool clean_absolute(const std::string& path) {
    if (!path.starts_with("/") || path.find('\0') != std::string::npos)
        return false;
    for (size_t start = 1; start <= path.size();) {
        size_t slash = std::min(path.find('/', start), path.size());
        std::string_view part(path.data() + start, slash - start);
        if (part == "." || part == "..")
            return false;
        start = slash + 1;
    }
    return true;
}

// {"image": IMAGE, "mounts": [{"source": DIR, "destination": DIR,
// "readonly": BOOL}, ...]}.
Result<void> container(const nlohmann::json& options, ShellOptions& opts) {
    auto it = options.find("container");
    if (it == options.end())
        return {};
    auto image = json_field<std::string>(*it, "image", "", "--container");
    if (!it->is_object() || !image || image->empty())
        return make_error(EINVAL, fmt::format("-o container={}: expected {{\"image\": IMAGE, \"mounts\": [...]}}",
                                              it->dump()));
    opts.container_image = *image;
    for (const auto& m : json_array_at(*it, "mounts")) {
        auto source = json_field<std::string>(m, "source", "", "--container-mount");
        auto destination = json_field<std::string>(m, "destination", "", "--container-mount");
        auto readonly = json_field<bool>(m, "readonly", false, "--container-mount");
        if (auto e = first_error(source, destination, readonly))
            return *e;
        if (!clean_absolute(*source) || !clean_absolute(*destination) || *destination == "/")
            return make_error(EINVAL, fmt::format("--container-mount={}:{}: expected SOURCE:DESTINATION[:ro], both "
                                                  "absolute paths without . or .. (and not /)",
                                                  *source, *destination));
        opts.container_mounts.push_back({*source, *destination, *readonly});
    }
    auto per_task = options.find("container-per-task");
    if (per_task != options.end()) {
        if (!per_task->is_boolean() && !per_task->is_number_integer())
            return make_error(EINVAL, fmt::format("-o container-per-task={}: expected true or false", per_task->dump()));
        opts.container_per_task = *per_task != false && *per_task != 0;
    }
    return {};
}

std::string output_path(const nlohmann::json& options, const char* stream) {
    const auto& s = json_object_at(options, {"output", stream});
    return s.contains("path") && s["path"].is_string() ? s["path"].get<std::string>() : "";
}

}  // namespace

Result<ShellOptions> read_shell_options(const nlohmann::json& system) {
    const auto& o = json_object_at(system, {"shell", "options"});
    for (const auto& [name, value] : o.items())
        if (std::find(std::begin(kKnownOptions), std::end(kKnownOptions), name) == std::end(kKnownOptions))
            return make_error(EINVAL, fmt::format("-o {}: unknown shell option (known: cpu-affinity, gpu-affinity, "
                                                  "exit-timeout, rlimit.NAME, output, input, stdin, signal, "
                                                  "profile, pmi, pty, slurm, container, container-per-task)",
                                                  name));
    ShellOptions opts;
    if (o.contains("profile")) {
        const auto& p = o["profile"];
        std::string v = p.is_string() ? p.get<std::string>() : p.dump();
        if (v == "network")
            opts.profile = Profile::network;
        else if (v == "cpu")
            opts.profile = Profile::cpu;
        else if (v == "memory")
            opts.profile = Profile::memory;
        else
            return make_error(EINVAL, fmt::format("-o profile={}: expected network, cpu or memory", v));
    }
    if (o.contains("pmi")) {
        const auto& p = o["pmi"];
        std::string v = p.is_string() ? p.get<std::string>() : p.dump();
        opts.pmix = opts.pmi_simple = false;
        if (v != "off") {
            for (size_t start = 0; start <= v.size();) {
                size_t comma = std::min(v.find(',', start), v.size());
                std::string name = v.substr(start, comma - start);
                start = comma + 1;
                if (name == "pmix")
                    opts.pmix = true;
                else if (name == "simple")
                    opts.pmi_simple = true;
                else
                    return make_error(EINVAL, fmt::format("-o pmi={}: unknown PMI '{}' (expected pmix, simple, "
                                                          "both as pmix,simple, or off)",
                                                          v, name));
            }
        }
    }
    auto cpu = affinity(o, "cpu-affinity");
    auto gpu = affinity(o, "gpu-affinity");
    auto timeout = exit_timeout(o);
    auto limits = rlimits(o);
    auto warning = warning_signal(o);
    auto contained = container(o, opts);
    if (auto e = first_error(cpu, gpu, timeout, limits, warning, contained))
        return *e;
    if (o.contains("container-per-task") && opts.container_image.empty())
        return make_error(EINVAL, "-o container-per-task: only with --container");
    opts.signal = *warning;
    opts.cpu_affinity = *cpu;
    opts.cpu_affinity_given = o.contains("cpu-affinity");
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
    if (o.contains("slurm")) {
        // true, or {"submit_dir": DIR, "ntasks": N}: where it was
        // submitted from, and a batch job's task count as asked (its tasks
        // are its instance's brokers, one a node).
        const auto& s = o["slurm"];
        const auto& fields = json_object_at(o, {"slurm"});
        auto ntasks = json_field<uint32_t>(fields, "ntasks", 0);
        auto submit_dir = json_field<std::string>(fields, "submit_dir", "");
        if (!(s.is_boolean() || s.is_number_integer() || s.is_object()) || !ntasks || !submit_dir)
            return make_error(EINVAL, fmt::format("-o slurm={}: expected true, false or {{\"submit_dir\": DIR, "
                                                  "\"ntasks\": N}}",
                                                  s.dump()));
        opts.slurm = s != false && s != 0;
        opts.slurm_ntasks = *ntasks;
        opts.slurm_submit_dir = *submit_dir;
    }
    if (o.contains("pty")) {
        // true, or the size it starts with (the CLI's terminal's).
        const auto& p = o["pty"];
        auto rows = json_field<uint16_t>(json_object_at(o, {"pty"}), "rows", opts.pty_rows);
        auto cols = json_field<uint16_t>(json_object_at(o, {"pty"}), "cols", opts.pty_cols);
        if (!(p.is_boolean() || p.is_object()) || !rows || !cols || *rows == 0 || *cols == 0)
            return make_error(EINVAL,
                              fmt::format("-o pty={}: expected true, false or {{\"rows\": N, \"cols\": N}}", p.dump()));
        opts.pty = p != false;
        opts.pty_rows = *rows;
        opts.pty_cols = *cols;
    }
    // Task 0's terminal is its input and its output.
    if (opts.pty && (!opts.input_path.empty() || !opts.stdout_path.empty() || !opts.stderr_path.empty() || opts.label))
        return make_error(EINVAL,
                          "--pty: task 0 reads and writes its terminal: not with --input, --output, --error "
                          "or -l");
    return opts;
}

}  // namespace banyan
