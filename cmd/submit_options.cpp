#include "cmd/submit_options.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <tuple>

#include <fnmatch.h>

#include <sys/resource.h>

#include <unistd.h>

#include <sys/stat.h>

#include <fmt/format.h>

#include "cmd/cli_util.hpp"
#include "core/byte_size.hpp"
#include "core/duration.hpp"
#include "core/jobid.hpp"
#include "core/json_parse.hpp"
#include "core/rlimits.hpp"
#include "core/text.hpp"
#include "core/text_file.hpp"
#include "sched/constraint.hpp"
#include "sched/job_request.hpp"

extern char** environ;

namespace banyan::cli {
namespace {

// A KEY=VALUE option's value: JSON when it parses as JSON, else the text.
nlohmann::json option_value(const std::string& text) {
    auto v = parse_json(text);
    return v ? *v : nlohmann::json(text);
}

// Sets the dotted PATH under `root` ("a.b.c" -> root[a][b][c]).
void set_path(nlohmann::json& root, std::string_view path, nlohmann::json value, std::string_view option) {
    nlohmann::json* at = &root;
    size_t start = 0;
    for (;;) {
        size_t dot = path.find('.', start);
        std::string key(path.substr(start, dot == std::string_view::npos ? dot : dot - start));
        if (key.empty())
            fail(fmt::format("{} {}: empty key name", option, path));
        if (!at->is_object())
            *at = nlohmann::json::object();
        if (dot == std::string_view::npos) {
            (*at)[key] = std::move(value);
            return;
        }
        at = &(*at)[key];
        start = dot + 1;
    }
}

std::pair<std::string, std::string> split_setting(const std::string& text, std::string_view option,
                                                  const char* fallback) {
    auto eq = text.find('=');
    if (eq == 0)
        fail(fmt::format("{} {}: expected KEY=VALUE", option, text));
    if (eq == std::string::npos) {
        if (!fallback)
            fail(fmt::format("{} {}: expected KEY=VALUE", option, text));
        return {text, fallback};
    }
    return {text.substr(0, eq), text.substr(eq + 1)};
}

using Environment = std::map<std::string, std::string>;

// One --env rule, as in Flux: NAME=VALUE sets; -PATTERN removes the
// names matching a glob; ^FILE applies the rules in FILE, one a line
// (blank lines and # comments skipped); a bare PATTERN (re)exports the
// matching names from the submitter's environment.
void apply_env_rule(Environment& env, const Environment& submitter, const std::string& rule, int depth) {
    if (rule.empty() || rule == "-" || rule == "^" || rule[0] == '=')
        fail(fmt::format("--env '{}': expected NAME=VALUE, -PATTERN, ^FILE or PATTERN", rule));
    if (rule[0] == '-') {
        std::erase_if(env, [&](const auto& kv) { return fnmatch(rule.c_str() + 1, kv.first.c_str(), 0) == 0; });
        return;
    }
    if (rule[0] == '^') {
        if (depth > 8)
            fail(fmt::format("--env {}: rule files include each other too deep", rule));
        auto text = read_text_file(rule.substr(1));
        if (!text)
            fail(fmt::format("--env {}: {}", rule, text.error().message));
        std::istringstream lines(*text);
        for (std::string line; std::getline(lines, line);) {
            auto first = line.find_first_not_of(" \t");
            if (first == std::string::npos || line[first] == '#')
                continue;
            apply_env_rule(env, submitter, line.substr(first, line.find_last_not_of(" \t\r") + 1 - first), depth + 1);
        }
        return;
    }
    if (auto eq = rule.find('='); eq != std::string::npos) {
        env[rule.substr(0, eq)] = rule.substr(eq + 1);
        return;
    }
    bool any = false;
    for (const auto& [name, value] : submitter)
        if (fnmatch(rule.c_str(), name.c_str(), 0) == 0) {
            env[name] = value;
            any = true;
        }
    if (!any)
        fail(fmt::format("--env {}: not set in this environment (give NAME=VALUE)", rule));
}

// The submitter's environment (BANYAN_* left out: each job gets its own)
// with the --env rules applied in order.
Environment environment(const std::vector<std::string>& rules) {
    Environment submitter;
    for (char** e = environ; *e; e++) {
        std::string_view entry(*e);
        auto eq = entry.find('=');
        if (eq != std::string_view::npos && !entry.starts_with("BANYAN_"))
            submitter.emplace(entry.substr(0, eq), entry.substr(eq + 1));
    }
    Environment env = submitter;
    for (const auto& rule : rules)
        apply_env_rule(env, submitter, rule, 0);
    return env;
}

// --dependency=SCHEME:ID[:ID...][,[SCHEME:]ID...]: an id without a scheme
// of its own takes the one before it (Flux's afterok:A,B and Slurm's
// afterok:A:B alike). Each id is sent as the user wrote it.
nlohmann::json dependencies(const std::vector<std::string>& specs) {
    nlohmann::json deps = nlohmann::json::array();
    auto known = [](const std::string& s) {
        return s == "afterok" || s == "afterany" || s == "afternotok" || s == "afterstart";
    };
    for (const auto& list : specs) {
        std::string scheme;
        for (const std::string& one : split_commas(list)) {
            if (one == "singleton") {  // after every earlier job of this user and name has ended
                deps.push_back({{"scheme", "singleton"}, {"value", ""}});
                scheme.clear();
                continue;
            }
            auto colon = one.find(':');
            std::string ids = one;
            if (colon != std::string::npos && known(one.substr(0, colon))) {
                scheme = one.substr(0, colon);
                ids = one.substr(colon + 1);
            }
            if (scheme.empty())
                fail(fmt::format("--dependency={}: expected afterok|afterany|afternotok|afterstart:JOBID[,JOBID...] "
                                 "or singleton",
                                 one));
            for (size_t start = 0; start <= ids.size();) {
                size_t end = std::min(ids.find(':', start), ids.size());
                std::string target = ids.substr(start, end - start);
                start = end + 1;
                if (auto id = parse_job_ref(target); !id)  // an id, or an array's element ID[INDEX]
                    fail(fmt::format("--dependency={}: {}", one, id.error().message));
                deps.push_back({{"scheme", scheme}, {"value", target}});
            }
        }
    }
    return deps;
}

// --signal=SIG@TIME as Flux reads it: either part may be left out
// (SIGUSR1, 60 s); TIME is a duration, a bare number in seconds.
nlohmann::json warning_signal(const std::string& text) {
    auto at = text.find('@');
    std::string sig = text.substr(0, at);
    std::string time = at == std::string::npos ? "" : text.substr(at + 1);
    int signum = sig.empty() ? SIGUSR1 : signal_number(sig, "--signal");
    double timeleft = 60;
    if (!time.empty()) {
        auto d = parse_duration(time, BareNumber::seconds);
        if (!d)
            fail("--signal " + d.error().message);
        timeleft = *d;
    }
    return {{"signum", signum}, {"timeleft", timeleft}};
}

}  // namespace

void add_submit_options(CLI::App* cmd, SubmitOptions& o) {
    cmd->add_option("-N,--nodes", o.nodes, "number of nodes");
    cmd->add_option("-n,--ntasks", o.ntasks, "number of tasks (default: 1, or one per node with -N)");
    cmd->add_option("-c,--cores-per-task", o.cores_per_task, "cores per task (default 1)");
    cmd->add_option("-g,--gpus-per-task", o.gpus_per_task, "GPUs per task (default 0)");
    cmd->add_option("--mem", o.memory, "memory on each node: SIZE with K, M, G or T (512M, 4G); without -N, one node");
    cmd->add_option("--mem-per-cpu", o.memory_per_cpu, "memory for each core: SIZE with K, M, G or T");
    cmd->add_option("-t,--time-limit", o.time_limit, "time limit: minutes, or 10s, 5m, 2h, 1d, HH:MM:SS");
    cmd->add_flag("-x,--exclusive", o.exclusive, "whole nodes (without -N: one whole node)");
    cmd->add_option("--urgency", o.urgency, "0 (hold) to 31 (expedite); default 16");
    cmd->add_option("--dependency", o.dependencies,
                    "afterok|afterany|afternotok|afterstart:JOBID[,...], or singleton (after your earlier jobs of "
                    "this name)")
        ->allow_extra_args(false);
    cmd->add_option("--begin-time", o.begin_time, "not before TIME: +DURATION, HH:MM[:SS], YYYY-MM-DD[ HH:MM], @EPOCH");
    cmd->add_option("--signal", o.signal,
                    "send SIG to the tasks TIME before the time limit: SIG@TIME (USR1@60s if "
                    "either part is left out)");
    cmd->add_option("-J,--job-name", o.job_name, "name shown by banyan jobs (default: the command)");
    cmd->add_option("--output", o.output,
                    "write stdout (and stderr, unless --error) to FILE; {{id}}, {{taskid}}, {{node}} are replaced");
    cmd->add_option("--error", o.error, "write stderr to FILE");
    // The three environment options feed one list of rules, in the order given.
    auto env_rule = [&o](std::string prefix) {
        return [&o, prefix](const std::string& value) { o.env.push_back(prefix + value); };
    };
    cmd->add_option_function<std::string>("--env", env_rule(""),
                                          "NAME=VALUE, -PATTERN (remove), ^FILE (rules), PATTERN (export); repeatable")
        ->trigger_on_parse()
        ->allow_extra_args(false);
    cmd->add_option_function<std::string>("--env-remove", env_rule("-"), "remove the variables matching PATTERN")
        ->trigger_on_parse()
        ->allow_extra_args(false);
    cmd->add_option_function<std::string>("--env-file", env_rule("^"), "apply the --env rules in FILE, one a line")
        ->trigger_on_parse()
        ->allow_extra_args(false);
    cmd->add_option("--cwd", o.cwd, "the tasks' working directory (default: this one)");
    cmd->add_option("-S,--setattr", o.setattr, "jobspec attribute KEY=VALUE (system. implied)")
        ->allow_extra_args(false);
    cmd->add_option("-o,--setopt", o.setopt, "shell option KEY[=VALUE]")->allow_extra_args(false);
    cmd->add_option("--input", o.input, "every task reads this file as stdin");
    cmd->add_option("-q,--queue", o.queue, "the queue (banyan queue list); default: the default queue");
    cmd->add_option("--reservation", o.reservation,
                    "run in this advance reservation (banyan reservation list), on its nodes, in its window");
    cmd->add_option("--bank", o.bank, "the bank the job is charged to (banyan bank list); default: yours");
    cmd->add_option("--requires", o.requirements,
                    "only nodes that meet EXPR: properties (gpu,^bigmem), host:HOSTLIST, rank:IDSET, "
                    "joined by and, or, not, parentheses")
        ->allow_extra_args(false);
    cmd->add_option("--container", o.container,
                    "run the tasks in a container of IMAGE: an OCI layout directory, an OCI archive, or an image "
                    "name in podman's storage");
    cmd->add_option("--container-mount", o.container_mounts,
                    "bind SRC on DST in the container, read-only with :ro (SRC:DST[:ro]); repeatable")
        ->allow_extra_args(false);
    cmd->add_option("--profile-ebpf", o.profile_ebpf,
                    "profile the job with eBPF: cpu,futex,tcp,shm,file or all; :optional runs it unprofiled where "
                    "a node cannot (banyan job profile ID shows it)")
        ->allow_extra_args(false);
    cmd->add_option("--profile-ebpf-interval", o.profile_ebpf_interval,
                    "seconds between profile samples while the job runs (1-3600; default 10)");
    cmd->add_flag("-l,--label-io", o.label_io, "start each line of output with the task rank");
    cmd->add_flag("--requeue", o.requeue, "if a node of the job fails, run it again (same id) instead of failing");
    cmd->add_option("--reattach-timeout", o.reattach_timeout,
                    "wait at most DURATION for a lost node to come back before the job fails (0: at once; "
                    "at most the instance's exec.reattach-timeout)");
}

namespace {

// --profile-ebpf=cpu,futex[:optional] and its interval, as
// attributes.system.ebpf (doc/spec/profiling.md §1); the job manager
// checks it again.
nlohmann::json ebpf_request(const SubmitOptions& o) {
    static const std::vector<std::string> known{"cpu", "futex", "tcp", "shm", "file"};
    std::string list = o.profile_ebpf;
    bool optional = false;
    if (list.ends_with(":optional")) {
        optional = true;
        list.resize(list.size() - 9);
    }
    std::vector<std::string> programs;
    for (const auto& name : split(list, ',')) {
        if (name == "all") {
            programs = known;
            continue;
        }
        if (std::find(known.begin(), known.end(), name) == known.end())
            fail(fmt::format("--profile-ebpf={}: no program \"{}\" (cpu, futex, tcp, shm, file, all)", o.profile_ebpf,
                             name));
        if (std::find(programs.begin(), programs.end(), name) == programs.end())
            programs.push_back(name);
    }
    if (programs.empty())
        fail(fmt::format("--profile-ebpf={}: name one or more of cpu, futex, tcp, shm, file, all", o.profile_ebpf));
    nlohmann::json request{{"programs", programs}, {"optional", optional}};
    if (o.profile_ebpf_interval != 0) {
        if (!(o.profile_ebpf_interval >= 1 && o.profile_ebpf_interval <= 3600))
            fail(fmt::format("--profile-ebpf-interval={}: expected 1 to 3600 seconds", o.profile_ebpf_interval));
        request["interval"] = o.profile_ebpf_interval;
    }
    return request;
}

std::string absolute_path(const std::string& path) {
    std::error_code ec;
    auto full = std::filesystem::absolute(path, ec).lexically_normal().string();
    if (full.size() > 1 && full.back() == '/')
        full.pop_back();
    return ec ? path : full;
}

// --container and --container-mount as the shell option (doc/spec/
// shell.md §9): paths made absolute, and what the submitter cannot read
// refused here rather than on a node.
nlohmann::json container_option(const SubmitOptions& o) {
    std::string image = o.container;
    struct stat st {};
    // A path, or a name in podman's storage (which may hold a '/':
    // localhost/app:1, docker.io/library/debian).
    bool is_path = image.starts_with("/") || image.starts_with("./") || image.starts_with("../") ||
                   stat(image.c_str(), &st) == 0;
    if (is_path) {
        if (stat(image.c_str(), &st) != 0)
            fail(fmt::format("--container={}: {}", o.container, std::strerror(errno)));
        image = absolute_path(image);
        std::string probe = S_ISDIR(st.st_mode) ? image + "/index.json" : image;
        if (S_ISDIR(st.st_mode) && access(probe.c_str(), F_OK) != 0)
            fail(fmt::format("--container={}: not an OCI image layout (no index.json); an archive, a layout "
                             "directory or an image name is expected",
                             o.container));
        if (access(probe.c_str(), R_OK) != 0)
            fail(fmt::format("--container={}: {}", o.container, std::strerror(errno)));
    }
    nlohmann::json mounts = nlohmann::json::array();
    for (const auto& m : o.container_mounts) {
        auto first = m.find(':');
        auto second = first == std::string::npos ? std::string::npos : m.find(':', first + 1);
        std::string source = m.substr(0, first);
        std::string destination = first == std::string::npos ? "" : m.substr(first + 1, second - first - 1);
        std::string mode = second == std::string::npos ? "rw" : m.substr(second + 1);
        if (source.empty() || !destination.starts_with("/") || (mode != "ro" && mode != "rw"))
            fail(fmt::format("--container-mount={}: expected SOURCE:DESTINATION[:ro], DESTINATION an absolute path", m));
        if (stat(source.c_str(), &st) != 0 ||
            access(source.c_str(), S_ISDIR(st.st_mode) ? R_OK | X_OK : R_OK) != 0)
            fail(fmt::format("--container-mount={}: {}: {}", m, source, std::strerror(errno)));
        mounts.push_back({{"source", absolute_path(source)}, {"destination", destination}, {"readonly", mode == "ro"}});
    }
    return {{"image", image}, {"mounts", mounts}};
}

}  // namespace

nlohmann::json build_jobspec(const SubmitOptions& o, const std::vector<std::string>& command) {
    if (command.empty())
        fail("no COMMAND given");
    if (o.urgency < 0 || o.urgency > 31)
        fail(fmt::format("--urgency {}: expected 0 (hold) to 31 (expedite)", o.urgency));
    JobRequest r{.command = command,
                 .nodes = o.nodes,
                 .ntasks = o.ntasks,
                 .cores_per_task = o.cores_per_task,
                 .gpus_per_task = o.gpus_per_task,
                 .exclusive = o.exclusive,
                 .requeue = o.requeue,
                 .name = o.job_name,
                 .queue = o.queue,
                 .reservation = o.reservation,
                 .array = o.array,
                 .bank = o.bank,
                 .cwd = o.cwd,
                 .environment = environment(o.env)};
    for (auto [option, text, into] : {std::tuple{"--mem", &o.memory, &r.memory_per_node},
                                      std::tuple{"--mem-per-cpu", &o.memory_per_cpu, &r.memory_per_core}}) {
        if (text->empty())
            continue;
        auto bytes = parse_byte_size(*text, BareSize::refused);
        if (!bytes)
            fail(fmt::format("{} {}", option, bytes.error().message));
        *into = *bytes;
    }
    if (!o.reattach_timeout.empty()) {
        auto d = parse_duration(o.reattach_timeout);
        if (!d)
            fail("--reattach-timeout " + d.error().message);
        r.reattach_timeout = *d;
    }
    if (!o.time_limit.empty()) {
        auto d = parse_duration(o.time_limit);
        if (!d)
            fail("-t " + d.error().message);
        r.time_limit = *d;
    }
    if (r.cwd.empty()) {
        std::error_code ec;
        r.cwd = std::filesystem::current_path(ec).string();
    }
    // The umask too, as Slurm passes it: the job's files are made as the
    // user's shell would make them.
    r.umask = umask(022);
    umask(r.umask);
    // The submitter's limits go with the job (as `ulimit` set them), so a
    // core file or a file-descriptor limit is the same inside; -o
    // rlimit.NAME=VALUE overrides one.
    for (const auto& [name, resource, propagated] : kRlimitNames) {
        rlimit limit{};
        if (propagated && getrlimit(resource, &limit) == 0)
            r.rlimits[name] =
                limit.rlim_cur == RLIM_INFINITY ? nlohmann::json("unlimited") : nlohmann::json(limit.rlim_cur);
    }
    r.dependencies = dependencies(o.dependencies);
    if (!o.begin_time.empty()) {
        auto when = parse_moment(o.begin_time, wall_now());
        if (!when)
            fail("--begin-time " + when.error().message);
        // A string, as RFC 26 has every value.
        r.dependencies.push_back({{"scheme", "begin-time"}, {"value", fmt::format("{:.3f}", *when)}});
    }
    if (!o.requirements.empty()) {
        nlohmann::json all = nlohmann::json::array();
        for (const auto& text : o.requirements) {
            auto c = Constraint::parse_query(text);
            if (!c)
                fail(fmt::format("--requires '{}': {}", text, c.error().message));
            all.push_back(std::move(*c));
        }
        r.constraint = all.size() == 1 ? all[0] : nlohmann::json{{"and", std::move(all)}};
    }
    auto built = banyan::build_jobspec(r, [&](JobField f) -> std::string {
        switch (f) {
            case JobField::command:
                return "COMMAND";
            case JobField::nodes:
                return fmt::format("-N {}", o.nodes.value_or(0));
            case JobField::ntasks:
                return fmt::format("-n {}", o.ntasks.value_or(0));
            case JobField::cores_per_task:
                return fmt::format("-c {}", o.cores_per_task);
            case JobField::gpus_per_task:
                return fmt::format("-g {}", o.gpus_per_task);
            case JobField::memory:
                return o.memory.empty() ? "--mem-per-cpu " + o.memory_per_cpu : "--mem " + o.memory;
            case JobField::time_limit:
                return "-t " + o.time_limit;
            case JobField::environment:
                return "the environment (--env)";
        }
        return "?";
    });
    if (!built)
        fail(built.error().message);
    nlohmann::json jobspec = std::move(*built);
    for (const auto& s : o.setattr) {
        auto [key, value] = split_setting(s, "-S", nullptr);
        bool qualified = key.starts_with("system.") || key.starts_with("user.");
        set_path(jobspec["attributes"], qualified ? key : "system." + key, option_value(value), "-S");
    }
    for (const auto& s : o.setopt) {
        auto [key, value] = split_setting(s, "-o", "1");
        set_path(jobspec["attributes"]["system"], "shell.options." + key, option_value(value), "-o");
    }
    if (!o.output.empty())
        set_path(jobspec["attributes"]["system"], "shell.options.output.stdout", {{"type", "file"}, {"path", o.output}},
                 "--output");
    if (!o.error.empty())
        set_path(jobspec["attributes"]["system"], "shell.options.output.stderr", {{"type", "file"}, {"path", o.error}},
                 "--error");
    if (!o.input.empty())
        set_path(jobspec["attributes"]["system"], "shell.options.input.stdin", {{"type", "file"}, {"path", o.input}},
                 "--input");
    if (o.label_io)
        set_path(jobspec["attributes"]["system"], "shell.options.output.label", true, "-l");
    if (!o.container.empty())
        set_path(jobspec["attributes"]["system"], "shell.options.container", container_option(o), "--container");
    else if (!o.container_mounts.empty())
        fail("--container-mount: only with --container=IMAGE");
    if (!o.profile_ebpf.empty())
        jobspec["attributes"]["system"]["ebpf"] = ebpf_request(o);
    else if (o.profile_ebpf_interval != 0)
        fail("--profile-ebpf-interval: only with --profile-ebpf=PROGRAMS");
    if (!o.signal.empty()) {
        if (!r.time_limit)
            fail(fmt::format("--signal={}: needs a time limit (-t) to count back from", o.signal));
        set_path(jobspec["attributes"]["system"], "shell.options.signal", warning_signal(o.signal), "--signal");
    }
    return jobspec;
}

}  // namespace banyan::cli
