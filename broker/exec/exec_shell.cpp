// The exec service: starting a job's shell (in its cgroup, through the
// fork server or banyan-imp) and what the shell says (doc/spec/shell.md
// §1, §3): output and exceptions on to rank 0, fences, started, finish.
#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <set>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "broker/exec/local_job.hpp"
#include "core/byte_size.hpp"
#include "core/duration.hpp"
#include "core/idset.hpp"
#include "core/json_field.hpp"
#include "core/json_parse.hpp"
#include "core/log.hpp"

namespace banyan {

Result<void> ExecService::start_shell(JobId id, LocalJob& job, nlohmann::json request, const std::string& jobspec) {
    const Bootstrap& boot = broker_.bootstrap();
    // The job's run directory (its PMIx files, the socket its shell waits
    // on for a broker that died): made here, handed to the job's user by
    // banyan-imp. Users may pass through jobs/, not list it.
    std::string jobs_dir = boot.rundir + "/jobs";
    mkdir(jobs_dir.c_str(), 0711);  // (made at start; again if the run directory was wiped)
    std::string tmpdir = fmt::format("{}/{}", jobs_dir, id);
    if (mkdir(tmpdir.c_str(), 0700) != 0 && errno != EEXIST)
        return make_error(errno, fmt::format("{}: {}", tmpdir, std::strerror(errno)));
    job.tmpdir = tmpdir;
    UniqueFd imp_request;
    if (job.userid != getuid()) {
        // banyan-imp's request, on its fd 3: a memfd, so that a jobspec of
        // any size never makes this loop wait on a pipe.
        imp_request = UniqueFd(memfd_create("imp-request", MFD_CLOEXEC));
        std::string text = nlohmann::json{
            {"id", id},
            {"rank", boot.rank},
            {"userid", job.userid},
            {"J", job.credential},
            {"R", request.contains("R") ? request["R"] : nlohmann::json()},
            {"tmpdir", tmpdir}}.dump();
        if (!imp_request || write(imp_request.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()) ||
            lseek(imp_request.get(), 0, SEEK_SET) != 0)
            return make_error(errno, fmt::format("banyan-imp's request: {}", std::strerror(errno)));
    }
    int to_shell[2], from_shell[2];
    if (pipe2(to_shell, O_CLOEXEC) < 0)
        return make_error(errno, fmt::format("pipe: {}", std::strerror(errno)));
    if (pipe2(from_shell, O_CLOEXEC) < 0) {
        close(to_shell[0]);
        close(to_shell[1]);
        return make_error(errno, fmt::format("pipe: {}", std::strerror(errno)));
    }
    // Started in its cgroup, so before any task exists.
    if (cgroup_parent_) {
        auto cg = JobCgroup::create(fmt::format("{}/{}", *cgroup_parent_, cgroup_name(id, job)));
        if (cg)
            job.cgroup.emplace(std::move(*cg));
        else
            log::warning("exec", "{}: no cgroup ({}); process groups only", format_jobid(id), cg.error().message);
    }
    if (job.memory_limit)
        limit_memory(id, job);
    job.channel = std::make_unique<LineChannel>(
        broker_.reactor(), from_shell[0], to_shell[1],
        [this, id](Result<nlohmann::json> m) { on_shell_message(id, std::move(m)); }, nullptr);
    // The shell's ends stay open here until it has started: a refused fork
    // falls back to an executed shell on the same pipes.
    auto ends = std::make_shared<ShellEnds>();
    ends->stdin_fd = UniqueFd(to_shell[0]);
    ends->stdout_fd = UniqueFd(from_shell[1]);
    ends->imp_request = std::move(imp_request);
    request.erase("userid");
    request.erase("J");
    request["rank"] = boot.rank;
    request["uri"] = fmt::format("local://{}/local.sock", boot.rundir);
    request["tmpdir"] = tmpdir;
    request["reattach_socket"] = tmpdir + "/reattach.sock";
    request["reattach_timeout"] = reattach_timeout_;
    request["finish_ack"] = true;  // `done` once its end is kept (finish())
    request["broker_uid"] = getuid();
    request["container_cache"] = container_cache_;
    request["container_cache_size"] = container_cache_size_;
    if (job.ebpf)
        request["ebpf"] = true;  // tasks wait for the profiler's word (profiling.md §5)
    else
        request.erase("ebpf");
    if (topology_xml_)
        request["topology"] = *topology_xml_;
    if (host_brokers_ > 1)
        request["host_brokers"] = host_brokers_;
    // Its first line: held, the shell of the broker owner's job gets it at
    // once (it waits in the pipe until the shell runs) and prepares the
    // job, its tasks waiting for `go`; another user's shell gets it at
    // exec.go (it would prepare as that user: what it makes is not the
    // broker's to remove if the start ends there). Not held, it goes once
    // the shell runs (release_lines).
    request.erase("hold");  // (exec.run's own: a prolog runs after exec.go)
    bool prepares = job.phase == LocalJob::Phase::held && job.userid == getuid();
    if (prepares)
        request["hold"] = true;
    // The jobspec as exec.run brought it, unparsed: the shell reads it.
    std::string line = LineChannel::line_of(request);
    line.pop_back();
    line.reserve(line.size() + jobspec.size() + 16);
    line += R"(,"jobspec":)";
    line += jobspec;
    line += '}';
    // A line that lets the tasks start goes once the shell runs (release_lines).
    if (prepares) {
        job.channel->send_line(std::move(line));
        job.held_lines.insert(job.held_lines.begin(), R"({"type":"go"})");  // what exec.go sends first
    } else {
        job.held_lines.insert(job.held_lines.begin(), std::move(line));  // before what came during the prolog
    }
    launch_shell(id, std::move(ends));  // last: a failure ends the job
    return {};
}

// Starts the job's shell on `ends`, in its cgroup; if it cannot be started
// there, without one; if not at all, the job's start fails (exec.run gets
// the error).
void ExecService::launch_shell(JobId id, std::shared_ptr<ShellEnds> ends) {
    LocalJob& job = *jobs_.at(id);
    SpawnOptions shell{.argv = ends->imp_request ? std::vector<std::string>{*imp_path_, "exec"}
                                                 : std::vector<std::string>{shell_path_},
                       .stdin_fd = ends->stdin_fd.get(),
                       .stdout_fd = ends->stdout_fd.get(),
                       .fd3 = ends->imp_request ? ends->imp_request.get() : -1,
                       .cgroup_fd = job.cgroup ? job.cgroup->fd() : -1,
                       .join_cgroup_fd = job.memory_cgroup ? job.memory_cgroup->fd() : -1};
    uint64_t launch = job.launch;
    spawn_shell(id, launch, shell, [this, id, launch, ends](Result<std::unique_ptr<Subprocess>> proc, bool retryable) {
        auto it = jobs_.find(id);
        if (it == jobs_.end() || it->second->launch != launch) {
            // Ended while its shell was being started (a held start,
            // terminated): the shell has no job to run.
            if (proc) {
                (void)(*proc)->signal(SIGKILL);
                exiting_shells_[launch] = std::move(*proc);
            }
            return;
        }
        LocalJob& started_job = *it->second;
        if (!proc && retryable && (started_job.cgroup || started_job.memory_cgroup)) {
            const JobCgroup& refused = started_job.memory_cgroup ? *started_job.memory_cgroup : *started_job.cgroup;
            log::warning("exec", "{}: cannot start the shell in {} ({}); {}", format_jobid(id), refused.dir(),
                         proc.error().message, started_job.memory_cgroup ? "without it" : "process groups only");
            // Its memory limit goes with the cgroup that held it.
            if (started_job.memory_limited) {
                started_job.memory_limited = false;
                tell_memory_not_limited(id, started_job, "the shell could not start in the cgroup that limits it");
            }
            (started_job.memory_cgroup ? started_job.memory_cgroup : started_job.cgroup).reset();
            return launch_shell(id, ends);
        }
        if (!proc) {
            std::optional<Message> run_request = std::exchange(started_job.answer_to, std::nullopt);
            remove_job(id);
            if (run_request)
                broker_.respond_error(*run_request, proc.error().code, proc.error().message);
            return;
        }
        started_job.shell = std::move(*proc);
        release_lines(id, started_job);
        if (started_job.ebpf)
            start_profiling(id, started_job);
    });
}

// "banyan-RANK-PID-JOBID.LAUNCH": brokers of other instances on this host
// (test instances, an instance inside another one's job) share the parent
// and can hand out the same job id, and a requeued job starts again while
// its last run's cgroup may still be emptying.
std::string ExecService::cgroup_name(JobId id, const LocalJob& job) const {
    return fmt::format("banyan-{}-{}-{}.{}", broker_.bootstrap().rank, getpid(), format_jobid(id), job.launch);
}

void ExecService::limit_memory(JobId id, LocalJob& job) {
    std::string why = "no memory controller for this broker";
    if (unified_memory_) {
        auto limited = job.cgroup ? job.cgroup->limit_memory(job.memory_limit)
                                  : Result<void>(make_error(ENOENT, "the job has no cgroup here"));
        if (limited)
            return (void)(job.memory_limited = true);
        why = limited.error().message;
    } else if (memory_parent_v1_) {
        // The shell joins it before it executes (SpawnOptions::join_cgroup_fd).
        auto cg = JobCgroup::create(fmt::format("{}/{}", *memory_parent_v1_, cgroup_name(id, job)));
        auto limited = cg ? cg->limit_memory(job.memory_limit) : Result<void>(cg.error());
        if (limited) {
            job.memory_cgroup.emplace(std::move(*cg));
            job.memory_limited = true;
            return;
        }
        why = limited.error().message;
    }
    tell_memory_not_limited(id, job, why);
}

// Scheduled, not enforced: the log says so, and the job (from its first
// rank, once: ranks are alike as a rule, and a note from each of 1,000
// would bury its output).
void ExecService::tell_memory_not_limited(JobId id, LocalJob& job, const std::string& why) {
    uint32_t rank = broker_.bootstrap().rank;
    log::warning("exec", "{}: memory not limited to {}: {}", format_jobid(id), format_byte_size(job.memory_limit),
                 why);
    if (rank != job.leader)
        return;
    send_to_job_manager(id, job,
                        {"job-manager.output",
                         {{"id", id},
                          {"task", 0},
                          {"stream", "stderr"},
                          {"data", fmt::format("banyan: note: rank {} does not limit this job's memory to {} ({})\n",
                                               rank, format_byte_size(job.memory_limit), why)}}});
}

void ExecService::report_oom_kills(JobId id, LocalJob& job) {
    if (!job.memory_limited)
        return;
    const JobCgroup* limited = job.memory_cgroup ? &*job.memory_cgroup : job.cgroup ? &*job.cgroup : nullptr;
    uint64_t kills = limited ? limited->oom_kills() : 0;
    if (kills == 0)
        return;
    uint32_t rank = broker_.bootstrap().rank;
    std::string note = fmt::format("out of memory on rank {}: the kernel killed {} process{} of the job for using "
                                   "more than its {} here (--mem)",
                                   rank, kills, kills == 1 ? "" : "es", format_byte_size(job.memory_limit));
    send_to_job_manager(id, job, {"job-manager.raise", {{"id", id}, {"type", "oom"}, {"severity", 0}, {"note", note}}});
}

void ExecService::spawn_shell(JobId id, uint64_t launch, const SpawnOptions& options, ShellStarted started) {
    auto on_exit = [this, id, launch](int status) { on_shell_exit(id, launch, status); };
    // Not banyan-imp (another user's job), nor a shell that joins a v1
    // memory cgroup (the fork server starts shells in v2 ones only).
    if (fork_shells_ && options.argv[0] == shell_path_ && options.join_cgroup_fd < 0) {
        if (!fork_server_ || !fork_server_->usable()) {
            auto server = ShellForkServer::start(broker_.reactor(), shell_path_);
            if (server)
                fork_server_ = std::move(*server);
            else
                log::warning("exec", "{}; executing each shell", server.error().message);
        }
        if (fork_server_ && fork_server_->usable()) {
            auto forked = [this, id, launch, options, on_exit, started](Result<std::unique_ptr<Subprocess>> proc,
                                                                        bool refused) {
                auto it = jobs_.find(id);
                if (proc || !refused || it == jobs_.end() || it->second->launch != launch)
                    return started(std::move(proc), false);  // (a job gone: its cgroup's fd with it)
                int code = proc.error().code;                // (EPROTO: the server could not read the request)
                if ((options.cgroup_fd < 0 || code == ENOSYS) && code != EPROTO) {
                    // clone3 itself is refused (a seccomp filter, an old
                    // kernel): this broker's shells are executed from now on.
                    log::warning("exec", "{}: {}; executing every shell", format_jobid(id), proc.error().message);
                    fork_shells_ = false;
                } else {
                    log::warning("exec", "{}: {}; executing its shell", format_jobid(id), proc.error().message);
                }
                started(Subprocess::spawn(broker_.reactor(), options, on_exit), true);
            };
            auto sent = fork_server_->fork_shell(options.stdin_fd, options.stdout_fd, options.cgroup_fd, on_exit,
                                                 std::move(forked));
            if (sent)
                return;
            log::warning("exec", "{}: {}; executing its shell", format_jobid(id), sent.error().message);
        }
    }
    started(Subprocess::spawn(broker_.reactor(), options, on_exit), true);  // a failed spawn started nothing
}

void ExecService::on_shell_message(JobId id, Result<nlohmann::json> message) {
    auto it = jobs_.find(id);
    if (it == jobs_.end())
        return;
    LocalJob& job = *it->second;
    if (!message && message.error().code == EMSGSIZE && !std::exchange(job.told_long_line, true)) {
        // Only a task that wrote into its shell's pipe sends one: the job
        // is told (not fatal), and rank 0 never holds the line.
        std::string note =
            fmt::format("rank {}: from the shell: {}", broker_.bootstrap().rank, message.error().message);
        log::error("exec", "{}: {}", format_jobid(id), note);
        return send_to_job_manager(
            id, job, {"job-manager.raise", {{"id", id}, {"type", "exec"}, {"severity", 1}, {"note", note}}});
    }
    if (!message)
        return log::error("exec", "{}: from the shell: {}", format_jobid(id), message.error().message);
    nlohmann::json& m = *message;
    // Typed reads: a shell that sends a field of another type is a bug (or
    // a task that wrote into the shell's pipe), never a broker crash.
    auto bad = [&](const Error& e) { log::error("exec", "{}: from the shell: {}", format_jobid(id), e.message); };
    auto type = json_field<std::string>(m, "type", "", "shell");
    if (!type)
        return bad(type.error());
    uint32_t rank = broker_.bootstrap().rank;
    if (*type == "output") {  // {task, stream, data} as the job manager takes it, plus the id
        m.erase("type");
        m["id"] = id;
        send_to_job_manager(id, job, {"job-manager.output", std::move(m)});
    } else if (*type == "exception") {
        auto exception = json_field<std::string>(m, "exception", "exec", "shell");
        auto severity = json_field<int64_t>(m, "severity", 0, "shell");
        auto note = json_field<std::string>(m, "note", "", "shell");
        if (auto e = first_error(exception, severity, note))
            return bad(*e);
        nlohmann::json body{{"id", id},
                            {"type", *exception},
                            {"severity", *severity},
                            {"note", fmt::format("{} (rank {})", *note, rank)}};
        send_to_job_manager(id, job, {"job-manager.raise", std::move(body)});
    } else if (*type == "fence") {
        auto seq = json_field<uint64_t>(m, "seq", 0, "shell");
        auto nshells = json_field<uint64_t>(m, "nshells", job.nshells, "shell");
        auto data = json_field<std::string>(m, "data", "", "shell");
        if (auto e = first_error(seq, nshells, data))
            return bad(*e);
        // `multicast`: the result may come by exec.fence-data (shell.md
        // §4.1), one copy a link; a leader of protocol 2 answers it whole.
        nlohmann::json body{{"id", id},      {"seq", *seq},      {"rank", rank}, {"nshells", *nshells},
                            {"data", *data}, {"multicast", true}};
        job.fences_asked.insert(*seq);
        broker_.rpc(Message::request("exec.fence", body, job.leader), [this, id, seq = *seq,
                                                                       launch = job.launch](const Message& resp) {
            auto j = jobs_.find(id);
            if (j == jobs_.end() || j->second->launch != launch)
                return;  // (the job runs again here: this was the run before's)
            // The result whole (a leader of protocol 2), unparsed here; or
            // word that it comes (or came) by exec.fence-data.
            auto answer = resp.errnum
                              ? Result<JsonWithRaw>(make_error(static_cast<int>(resp.errnum), resp.error_text()))
                              : parse_json_except(resp.payload ? std::string_view(*resp.payload) : "{}", "data");
            if (answer && answer->raw && answer->raw->front() == '{')
                return hand_fence_to_shell(*j->second, seq, *answer->raw);
            if (answer && json_field<bool>(answer->rest, "multicast", false, "exec.fence").value_or(false))
                return;
            if (!j->second->fences_asked.erase(seq))
                return;  // handed already: the leader was lost after it sent the result
            nlohmann::json exception{
                {"id", id},
                {"type", "exec"},
                {"severity", 0},
                {"note", fmt::format("fence (PMIx or PMI-1): {}", answer ? "no data" : answer.error().message)}};
            send_to_job_manager(id, *j->second, {"job-manager.raise", std::move(exception)});
        });
    } else if (*type == "proxy") {
        auto tag = json_field<uint64_t>(m, "tag", 0, "shell");
        auto errnum = json_field<int64_t>(m, "errnum", 0, "shell");
        auto errstr = json_field<std::string>(m, "errstr", "", "shell");
        if (auto e = first_error(tag, errnum, errstr))
            return bad(*e);
        auto req = job.proxied.find(*tag);
        if (req == job.proxied.end())
            return bad(make_error(EPROTO, fmt::format("an answer to proxy request {}, which is not waiting", *tag)));
        Message request = std::move(req->second);
        job.proxied.erase(req);
        if (*errnum > 0 && *errnum < 4096)
            return broker_.respond_error(request, static_cast<int>(*errnum), *errstr);
        broker_.respond(Message::response_to(request, json_object_at(m, {"payload"})));
    } else if (*type == "started") {
        job.phase = LocalJob::Phase::running;
        job.tasks_ran = true;
        report_started(id);
        // Where jobs of other users run, a job not held by a cgroup is
        // told so, once, in its output (doc/spec/shell.md §1).
        if (!job.cgroup && !job.adopted_pid && job.userid != getuid() && rank == job.leader)
            send_to_job_manager(
                id, job,
                {"job-manager.output",
                 {{"id", id},
                  {"task", 0},
                  {"stream", "stderr"},
                  {"data", fmt::format("banyan: note: this job runs without cgroup containment on rank {}: its "
                                       "memory is not limited, and a process that leaves its process group may "
                                       "outlive it\n",
                                       rank)}}});
    } else if (*type == "finish") {
        auto status = json_field<int64_t>(m, "status", 0, "shell");
        auto time = json_field<double>(m, "time", 0, "shell");
        const auto& usage = json_object_at(m, {"usage"});
        auto cpu = json_field<double>(usage, "cpu", 0, "shell.usage");
        auto maxrss = json_field<uint64_t>(usage, "maxrss", 0, "shell.usage");
        if (auto e = first_error(status, time, cpu, maxrss))
            return bad(*e);
        // The shell runs as the job's user: a number it sends is bounded
        // here (no NaN, infinity or negative CPU time reaches a record).
        job.usage = {std::isfinite(*cpu) ? std::clamp(*cpu, 0.0, 1e12) : 0.0,
                     std::min<uint64_t>(*maxrss, uint64_t{1} << 50)};
        job.status = static_cast<int>(*status);
        job.end_time = *time > 0 ? *time : wall_now();
        // Its tasks and their files are gone (§6): the job ends now, not
        // once the shell's own exit is through (~0.5 ms on the next job's
        // cores).
        on_shell_done(id, std::nullopt);
    } else if (*type == "ebpf-tasks") {  // which of its children is which rank (profiling.md §5)
        // Once, and bounded: the shell runs as the job's user.
        const auto& tasks = json_array_at(m, "tasks");
        if (job.ebpf_tracked && profiler_ && !std::exchange(job.ebpf_tasks_named, true) &&
            tasks.size() <= kMaxTasksNamed)
            profiler_->ask({{"op", "tasks"}, {"job", id}, {"tasks", tasks}},
                           [id](Result<nlohmann::json> named) {
                               if (!named)
                                   log::warning("exec", "{}: profile: {}", format_jobid(id), named.error().message);
                           });
    } else if (*type == "hello") {  // an adopted shell: whether its tasks all run
        auto started = json_field<bool>(m, "started", false, "shell");
        if (!started)
            return bad(started.error());
        if (*started) {
            job.phase = LocalJob::Phase::running;
            job.tasks_ran = true;
            if (job.answer_to)  // asked for before this line came
                report_started(id);
        }
    } else {
        log::error("exec", "{}: unknown message from the shell: {}", format_jobid(id), m.dump());
    }
}

void ExecService::on_shell_exit(JobId id, uint64_t launch, int wait_status) {
    auto it = jobs_.find(id);
    if (it == jobs_.end() || it->second->launch != launch)
        return (void)exiting_shells_.erase(launch);  // (allowed: its Subprocess calls this last)
    it->second->channel->read_available();           // its last lines (finish among them) are in the pipe
    on_shell_done(id, wait_status);
}

void ExecService::on_shell_done(JobId id, std::optional<int> wait_status) {
    auto it = jobs_.find(id);
    if (it == jobs_.end() || it->second->phase == LocalJob::Phase::ending)
        return;
    LocalJob& job = *it->second;
    job.phase = LocalJob::Phase::ending;  // (a held shell that died: nothing is left to start)
    job.on_go = nullptr;
    job.held_lines.clear();
    for (auto& [tag, request] : job.proxied)
        broker_.respond_error(request, ECONNRESET, "the job's shell ended");
    job.proxied.clear();
    report_oom_kills(id, job);
    if (job.cgroup)
        job.cgroup->kill_all();
    if (job.memory_cgroup)
        job.memory_cgroup->kill_all();
    auto end = [this, id, wait_status] {
        LocalJob& ended = *jobs_.at(id);
        if (ended.status)
            return after_epilog(id,
                                [this, id, status = *ended.status, time = ended.end_time] { finish(id, status, time); });
        std::string note = fmt::format("banyan-shell on rank {} {}", broker_.bootstrap().rank,
                                       describe_wait_status(wait_status.value_or(0)));
        after_epilog(id, [this, id, note] { fail(id, note); });
    };
    // Profiled: its last counters reach rank 0 before exec.run's answer.
    if (job.ebpf_tracked)
        return end_profiling(id, job, std::move(end));
    end();
}

}  // namespace banyan
