#include "broker/exec/exec_service.hpp"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <set>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <pwd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "broker/exec/job_cgroup.hpp"
#include "core/duration.hpp"
#include "core/idset.hpp"
#include "core/json_field.hpp"
#include "core/json_parse.hpp"
#include "core/line_channel.hpp"
#include "core/log.hpp"
#include "core/programs.hpp"
#include "core/text_file.hpp"
#include "core/unix_socket.hpp"
#include "resource/machine_topology.hpp"
#include "resource/rv1.hpp"

namespace banyan {
namespace {

// After SIGKILL went to the tasks, how long the shell has to report before
// it and its cgroup are killed too.
constexpr auto kShellGrace = std::chrono::seconds(2);
// Output sent to rank 0 and not yet answered beyond which the shell's
// pipe is no longer read (it resumes at half): bounds what a fast writer
// queues in the brokers.
constexpr size_t kOutputInFlightLimit = size_t{4} << 20;
// Output kept per job while rank 0 cannot take it (doc/spec/shell.md §8).
constexpr size_t kKeptOutputLimit = size_t{1} << 20;

// Seconds from a run_duration given as a number or as "10s"-style text.
Result<double> run_duration(const nlohmann::json& v) {
    constexpr double kMaxSeconds = 1e9;  // (~31 years: as milliseconds, it fits a timer)
    Result<double> seconds = make_error(EINVAL, "");
    if (v.is_number())
        seconds = v.get<double>();
    else if (v.is_string())
        seconds = parse_duration(v.get<std::string>(), BareNumber::seconds);
    if (!seconds || !std::isfinite(*seconds) || *seconds < 0 || *seconds > kMaxSeconds)
        return make_error(EINVAL,
                          "attributes.system.exec.test.run_duration: expected seconds (0 to 1e9) or a "
                          "duration like 10s");
    return seconds;
}

// A duration key that must be more than 0, in seconds.
Result<double> positive_duration(const Config& config, std::string_view key, double fallback) {
    auto value = config.get_duration(key, fallback);
    if (value && *value <= 0)
        return make_error(EINVAL, fmt::format("{}: must be more than 0", key));
    return value;
}

std::string user_name_of(uint32_t uid) {
    const passwd* pw = getpwuid(uid);
    return pw ? pw->pw_name : std::to_string(uid);
}

std::string describe_wait_status(int wait_status) {
    if (WIFSIGNALED(wait_status))
        return fmt::format("was killed by signal {} ({})", WTERMSIG(wait_status), strsignal(WTERMSIG(wait_status)));
    return fmt::format("exited with status {} before it reported", exit_code_from_wait_status(wait_status));
}

// How many brokers of the instance run on this broker's host: those its
// host list names alike; without a list, all of them when the overlay is
// made of Unix sockets (ipc://, one machine: banyan start --test-size),
// else this one (a nested instance's brokers run one per node of its
// job, on cores the enclosing instance gave each alone).
uint32_t host_brokers(const Bootstrap& boot) {
    if (!boot.hosts.empty()) {
        uint32_t n = 0;
        const std::string mine = boot.host_of(boot.rank);
        for (uint32_t r = 0; r < boot.size; r++)
            n += boot.host_of(r) == mine ? 1 : 0;
        return std::max<uint32_t>(n, 1);
    }
    const std::string& overlay = boot.parent_uri.empty() ? boot.bind_uri : boot.parent_uri;
    return overlay.starts_with("ipc://") ? boot.size : 1;
}

}  // namespace

struct ExecService::LocalJob {
    // exec.run or exec.reattach, answered when the shell has finished;
    // none for an adopted shell until a job manager asks (the result is
    // kept in ended_ all the same).
    std::optional<Message> answer_to;
    pid_t adopted_pid = 0;  // a dead broker's shell, reached through its socket
    bool started = false;   // every local task runs
    // What rank 0 did not take (no route to it), and all after it, in
    // order: sent again at exec.reattach.
    std::vector<ForRank0> kept;
    size_t kept_bytes = 0;     // of output
    bool output_lost = false;  // past kKeptOutputLimit: output dropped, with one notice
    bool told_long_line = false;  // the job heard once that its shell sent a line too long
    uint32_t leader = 0;  // the first rank of R: where fences meet
    uint32_t nshells = 1;
    std::unique_ptr<Subprocess> shell;
    std::unique_ptr<LineChannel> channel;
    std::optional<JobCgroup> cgroup;
    std::optional<int> status;    // from the shell's finish
    bool shell_done = false;      // finish came, or the shell is gone: the job is ending
    double end_time = 0;          // ... and when its tasks ended
    size_t output_in_flight = 0;  // bytes sent to job-manager.output, not yet answered
    std::unique_ptr<Timer> simulated;
    std::unique_ptr<Timer> escalate;  // terminate: SIGKILL, then the shell itself
    uint32_t userid = 0;              // the job's owner
    std::string credential;           // the owner's MUNGE credential (J), for banyan-imp
    std::string tmpdir;               // <rundir>/jobs/<id>, removed with the job
    std::vector<std::string> perilog_env;  // BANYAN_JOB_*, BANYAN_R: for the prolog and epilog
    std::unique_ptr<Subprocess> perilog;
    std::unique_ptr<Timer> perilog_timer;
    bool perilog_timed_out = false;
    std::optional<int> killed_before_start;  // a signal that came during the prolog
    // exec.run with `hold`: the start waits for exec.go (shell.md §7); the
    // shell has its job and is ready. What it would be sent meanwhile, or
    // during the prolog, waits here, in order.
    bool held = false;
    std::function<void()> on_go;  // what exec.go starts besides (a prolog, a simulated run)
    std::vector<std::string> held_lines;  // JSON, one line each
    // exec.proxy requests the shell has not answered yet, by tag.
    std::map<uint64_t, Message> proxied;
    uint64_t next_proxy_tag = 1;
    // Which start of this job id on this rank: a late answer or exit of an
    // earlier one's shell (a start ended, then run again after rank 0
    // restarted) is told apart by it.
    uint64_t launch = 0;
};

struct ExecService::Fence {
    nlohmann::json data = nlohmann::json::object();  // rank -> base64
    std::vector<Message> waiting;
    size_t bytes = 0;     // of data, all shells together
    bool failed = false;  // over kFenceDataLimit: every part answered with the error
    uint32_t failed_parts = 0;
};

Result<std::unique_ptr<ExecService>> ExecService::start(Broker& broker) {
    std::unique_ptr<ExecService> svc(new ExecService(broker));
    const Config& config = broker.bootstrap().config;
    auto timeout = positive_duration(config, "exec.kill-timeout", 5.0);
    auto reattach = positive_duration(config, "exec.reattach-timeout", 300.0);
    auto perilog_timeout = positive_duration(config, "exec.prolog-timeout", 60.0);
    if (auto e = first_error(timeout, reattach, perilog_timeout))
        return *e;
    svc->kill_timeout_ = std::chrono::milliseconds(static_cast<int64_t>(*timeout * 1000));
    svc->reattach_timeout_ = *reattach;
    svc->perilog_timeout_ = *perilog_timeout;
    // Banyan's shell, unless the config names another (as Flux's
    // exec.job-shell: a site's wrapper, or a test's fault).
    auto shell = config.get_string("exec.job-shell", program_path("banyan-shell"));
    if (!shell)
        return shell.error();
    svc->shell_path_ = *shell;
    svc->fork_shells_ = !config.has("exec.job-shell") && ShellForkServer::supported();
    for (auto [key, field] : {std::pair{"exec.prolog", &svc->prolog_}, std::pair{"exec.epilog", &svc->epilog_}})
        if (config.has(key)) {
            auto command = config.get_string(key);
            if (!command)
                return command.error();
            // A program named by its path must be there now, not at the
            // first job.
            std::string program = command->substr(0, command->find(' '));
            if (program.starts_with("/") && access(program.c_str(), X_OK) != 0)
                return make_error(errno, fmt::format("{}: {}: {}", key, program, std::strerror(errno)));
            *field = *command;
        }
    // Jobs of other users start through banyan-imp (banyan-imp(8)); a helper
    // that cannot do that is refused here, never found out per job.
    if (config.has("exec.imp")) {
        auto imp = config.get_string("exec.imp");
        if (!imp)
            return imp.error();
        struct stat st {};
        if (stat(imp->c_str(), &st) != 0)
            return make_error(errno, fmt::format("exec.imp: {}: {}", *imp, std::strerror(errno)));
        if (st.st_uid != 0 || !(st.st_mode & S_ISUID))
            return make_error(EPERM,
                              fmt::format("exec.imp: {}: not setuid root (chown root:banyan; chmod 4750)", *imp));
        if (access(imp->c_str(), X_OK) != 0)
            return make_error(EPERM, fmt::format("exec.imp: {}: not executable by uid {} (its group must be this "
                                                 "user's: chown root:banyan)",
                                                 *imp, getuid()));
        svc->imp_path_ = *imp;
    }
    auto mounts = read_text_file("/proc/self/mounts");
    auto own = read_text_file("/proc/self/cgroup");
    if (mounts && own)
        if (auto dir = own_unified_cgroup(*mounts, *own); dir && access(dir->c_str(), W_OK) == 0)
            svc->cgroup_parent_ = *dir;
    // Said once, at start: a job here is not held by a cgroup, and an
    // admin must know it (doc/spec/shell.md §1); a warning where jobs of
    // other users run, news on a laptop's test instance.
    if (svc->cgroup_parent_) {
        log::info("exec", "jobs are contained: each in a cgroup of its own under {}", *svc->cgroup_parent_);
    } else {
        log::write(svc->imp_path_ ? log::Level::warning : log::Level::info, "exec",
                   "no writable cgroup v2 hierarchy for this broker: jobs run without containment (process groups "
                   "only: their memory is not limited, and what leaves its process group is found through its "
                   "shell only)");
    }
    // Discovered once here rather than by every shell (doc/spec/shell.md
    // section 1). None where hwloc describes another machine (synthetic,
    // XML): shells then find none either and run tasks unbound.
    if (auto topology = MachineTopology::discover()) {
        std::string path = broker.bootstrap().rundir + "/topology.xml";
        if (auto saved = topology->save_xml(path); saved)
            svc->topology_xml_ = path;
        else
            log::warning("exec", "{}; each shell discovers it", saved.error().message);
    }
    // Brokers sharing a host (a test instance, or several ranks given one
    // host name) each claim all of its cores: the same core can then be
    // handed out twice, so their shells do not bind tasks (shell.md §5).
    const Bootstrap& boot = broker.bootstrap();
    svc->host_brokers_ = host_brokers(boot);
    if (svc->host_brokers_ > 1 && boot.rank == 0)
        log::info("exec",
                  "{} brokers of this instance share host {} and each claims all its cores: tasks are not bound "
                  "to cores unless -o cpu-affinity asks, and MPI ranks yield when idle",
                  svc->host_brokers_, boot.host_of(boot.rank));
    ExecService* s = svc.get();
    broker.register_method("exec.run", true, [s](const Message& r) { s->on_run(r); });
    broker.register_method("exec.go", true, [s](const Message& r) { s->on_go(r); });
    broker.register_method("exec.kill", true, [s](const Message& r) { s->on_kill(r); });
    broker.register_method("exec.terminate", true, [s](const Message& r) { s->on_terminate(r); });
    broker.register_method("exec.reconcile", true, [s](const Message& r) { s->on_reconcile(r); });
    broker.register_method("exec.stdin", true, [s](const Message& r) { s->on_stdin(r); });
    broker.register_method("exec.fence", true, [s](const Message& r) { s->on_fence(r); });
    broker.register_method("exec.proxy", true, [s](const Message& r) { s->on_proxy(r); });
    broker.register_method("exec.reattach", true, [s](const Message& r) { s->on_reattach(r); });
    broker.register_method("exec.cut-off", true, [s](const Message& r) { s->on_cut_off(r); });
    if (broker.bootstrap().rank != 0) {
        svc->parent_check_ = std::make_unique<Timer>(broker.reactor());
        svc->parent_check_->start_repeating(std::chrono::seconds(1), [s] { s->check_parent(); });
    }
    // Users pass through jobs/ to their jobs' directories, never list it.
    std::string jobs_dir = broker.bootstrap().rundir + "/jobs";
    mkdir(jobs_dir.c_str(), 0711);
    chmod(jobs_dir.c_str(), 0711);
    svc->ended_ = std::make_unique<EndedShares>(jobs_dir + "/ended", svc->reattach_timeout_);
    svc->adopt_orphaned_shells();
    return svc;
}

ExecService::ExecService(Broker& broker) : broker_(broker) {}
ExecService::~ExecService() {
    // The broker is stopping: told so (`end`), a shell ends its tasks when
    // its pipe closes rather than wait to be re-attached, so each gets up
    // to a second for that before destroying it sends SIGKILL (which
    // would orphan its tasks where there is no cgroup).
    for (auto& [id, job] : jobs_) {
        if (job->channel) {
            job->channel->send({{"type", "end"}});
            job->channel->flush();
        }
        job->channel.reset();
    }
    auto deadline = Clock::now() + std::chrono::seconds(1);
    for (auto& [id, job] : jobs_) {
        while (job->shell && Clock::now() < deadline) {
            siginfo_t info{};
            if (waitid(P_PID, static_cast<id_t>(job->shell->pid()), &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
                info.si_pid != 0)
                break;  // exited (reaped by its Subprocess next)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
    }
    // Their run directories go with them, as at a job's end.
    for (auto& [id, job] : jobs_) {
        std::error_code ec;
        if (!job->tmpdir.empty())
            std::filesystem::remove_all(job->tmpdir, ec);
    }
}

void ExecService::on_run(const Message& req) {
    // The jobspec (with the user's environment, most of the request) goes
    // on to the shell as it came: this service reads only what it needs
    // of it, without building it.
    auto body = parse_json_except(req.payload ? std::string_view(*req.payload) : "{}", "jobspec");
    if (!body)
        return broker_.respond_error(req, EPROTO, "exec.run: " + body.error().message);
    const nlohmann::json& p = body->rest;
    auto id = json_field<uint64_t>(p, "id", 0, "exec.run");
    auto userid = json_field<uint32_t>(p, "userid", getuid(), "exec.run");
    if (auto e = first_error(id, userid))
        return broker_.respond_error(req, EPROTO, e->message);
    std::string_view jobspec = body->raw.value_or("");
    if (!jobspec.starts_with('{'))
        return broker_.respond_error(req, EPROTO, "exec.run: expected a jobspec");
    if (jobspec.find('\n') != std::string_view::npos || jobspec.find('\r') != std::string_view::npos)  // (memchr)
        return broker_.respond_error(req, EPROTO, "exec.run: the jobspec is not on one line");
    auto test_raw = json_raw_at(jobspec, {"attributes", "system", "exec", "test"});
    auto test = test_raw && *test_raw ? parse_json(**test_raw) : Result<nlohmann::json>(nlohmann::json::object());
    if (auto e = first_error(test_raw, test))
        return broker_.respond_error(req, EPROTO, "exec.run.jobspec: " + e->message);
    if (jobs_.count(*id))
        return broker_.respond_error(req, EEXIST, fmt::format("{} already runs here", format_jobid(*id)));
    auto credential = json_field<std::string>(p, "J", "", "exec.run");
    auto hold = json_field<bool>(p, "hold", false, "exec.run");
    if (auto e = first_error(credential, hold))
        return broker_.respond_error(req, EPROTO, e->message);
    if (*userid != getuid() && !imp_path_)
        return broker_.respond_error(req, EPERM,
                                     fmt::format("cannot run tasks as uid {}: this broker runs as uid {} and has no "
                                                 "exec.imp to start jobs as their users",
                                                 *userid, getuid()));
    auto job = std::make_unique<LocalJob>();
    job->launch = ++launches_;
    job->userid = *userid;
    job->credential = *credential;
    job->answer_to = req;
    job->answer_to->payload.reset();  // enough to answer it
    if (test->is_object() && test->contains("run_duration")) {
        // Never held: it has no task that a crash before its alloc is on
        // disk could run twice (its events follow alloc's in the log).
        auto seconds = run_duration((*test)["run_duration"]);
        if (!seconds)
            return broker_.respond_error(req, EINVAL, seconds.error().message);
        job->simulated = std::make_unique<Timer>(broker_.reactor());
        job->simulated->start(std::chrono::milliseconds(static_cast<int64_t>(*seconds * 1000)),
                              [this, id = *id] { finish(id, 0, wall_now()); });
        job->started = true;
        jobs_.emplace(*id, std::move(job));
        return report_started(*id);
    }
    job->held = *hold;
    auto R = p.contains("R") ? Rv1::from_json(p["R"]) : Result<Rv1>(make_error(EPROTO, "exec.run: no R"));
    if (!R || R->ranks.empty())
        return broker_.respond_error(req, EPROTO, R ? "exec.run.R: no ranks" : R.error().message);
    job->leader = R->ranks.begin()->first;
    job->nshells = static_cast<uint32_t>(R->ranks.size());
    if (prolog_ || epilog_)  // (a user name may be a directory lookup: not for every job)
        job->perilog_env = {fmt::format("BANYAN_JOB_ID={}", format_jobid(*id)),
                            fmt::format("BANYAN_JOB_USERID={}", *userid),
                            fmt::format("BANYAN_JOB_USER={}", user_name_of(*userid)),
                            fmt::format("BANYAN_JOB_RANK={}", broker_.bootstrap().rank), "BANYAN_R=" + p["R"].dump()};
    LocalJob& j = *jobs_.emplace(*id, std::move(job)).first->second;
    auto start = [this, id = *id, request = std::move(body->rest),
                  jobspec = std::string(jobspec)](std::optional<std::string> prolog_failed) mutable {
        auto it = jobs_.find(id);
        if (it == jobs_.end())
            return;
        if (prolog_failed) {
            // As Slurm: the job fails with a `prolog` exception and the
            // node is drained with the reason, so no next job lands here.
            drain_self(*prolog_failed);
            send_to_job_manager(
                id, *it->second,
                {"job-manager.raise", {{"id", id}, {"type", "prolog"}, {"severity", 0}, {"note", *prolog_failed}}});
            return finish(id, 1, wall_now());
        }
        if (it->second->killed_before_start)
            return finish(id, 128 + *it->second->killed_before_start, wall_now());
        if (auto r = start_shell(id, *it->second, std::move(request), jobspec); !r) {
            Message run_request = *it->second->answer_to;
            jobs_.erase(it);
            broker_.respond_error(run_request, r.error().code, r.error().message);
        }
    };
    if (prolog_ && j.held) {
        // The prolog acts on the node for the job: only once it may start.
        j.on_go = [this, id = *id, start = std::move(start)]() mutable {
            run_perilog(id, *jobs_.at(id), "prolog", std::move(start));
        };
        return;
    }
    if (prolog_)
        return run_perilog(*id, j, "prolog", std::move(start));
    start(std::nullopt);  // held: the shell is started, its first line waits for exec.go
}

// exec.go {id}: the job's alloc is on disk, its start may go on.
void ExecService::on_go(const Message& req) {
    nlohmann::json body;
    LocalJob* job = job_for(req, body);
    if (!job)
        return;
    broker_.respond(Message::response_to(req, nlohmann::json::object()));
    go(*job);
}

void ExecService::go(LocalJob& job) {
    if (!job.held)
        return;
    job.held = false;
    if (job.channel)
        send_held_lines(job);
    if (auto then = std::exchange(job.on_go, nullptr))
        then();
}

// Lines to a shell go out in order: none before its first (the job's,
// after the prolog) nor between that and `go` (held).
void ExecService::to_shell(LocalJob& job, nlohmann::json line) {
    if (job.channel && !job.held)
        job.channel->send(line);
    else if (!job.shell_done && !job.simulated)
        job.held_lines.push_back(LineChannel::line_of(line));
}

void ExecService::send_held_lines(LocalJob& job) {
    for (auto& line : std::exchange(job.held_lines, {}))
        job.channel->send_line(std::move(line));
}

// A held job ends before any task of it ran: its shell, waiting for `go`
// (or its first line), is killed with whatever it left in its cgroup.
void ExecService::end_held(JobId id, int signo) {
    LocalJob& job = *jobs_.at(id);
    if (job.shell_done)
        return;
    job.held = false;
    job.on_go = nullptr;
    job.held_lines.clear();
    job.shell_done = true;
    if (job.shell)
        (void)job.shell->signal(SIGKILL);
    if (job.cgroup)
        job.cgroup->kill_all();
    finish(id, 128 + signo, wall_now());
}

// exec.prolog / exec.epilog: `/bin/sh -c COMMAND` as this broker's user
// (for root, the command is `banyan-imp run prolog`), with the job's
// variables, killed at exec.prolog-timeout. `done` gets why it failed, or
// nothing.
void ExecService::run_perilog(JobId id, LocalJob& job, const char* which,
                              std::function<void(std::optional<std::string>)> done) {
    std::vector<std::string> env;
    for (char** e = environ; *e; e++)
        env.emplace_back(*e);
    env.insert(env.end(), job.perilog_env.begin(), job.perilog_env.end());
    const std::string& command = std::string_view(which) == "prolog" ? *prolog_ : *epilog_;
    // Posted: the Subprocess is destroyed here, not inside its own callback.
    auto on_exit = [this, id, which, done](int wait_status) {
        broker_.reactor().post([this, id, which, wait_status, done] {
            auto it = jobs_.find(id);
            if (it != jobs_.end()) {
                it->second->perilog.reset();
                it->second->perilog_timer.reset();
            }
            if (WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0)
                return done(std::nullopt);
            bool timed_out = it != jobs_.end() && it->second->perilog_timed_out;
            done(timed_out ? fmt::format("{} on rank {} did not end within {}s (exec.prolog-timeout)", which,
                                         broker_.bootstrap().rank, perilog_timeout_)
                           : fmt::format("{} on rank {} {}", which, broker_.bootstrap().rank,
                                         WIFEXITED(wait_status)
                                             ? fmt::format("exited with status {}", WEXITSTATUS(wait_status))
                                             : describe_wait_status(wait_status)));
        });
    };
    auto proc = Subprocess::spawn(broker_.reactor(), {.argv = {"/bin/sh", "-c", command}, .env = env}, on_exit);
    if (!proc)
        return done(fmt::format("{} on rank {}: {}", which, broker_.bootstrap().rank, proc.error().message));
    job.perilog = std::move(*proc);
    job.perilog_timed_out = false;
    job.perilog_timer = std::make_unique<Timer>(broker_.reactor());
    job.perilog_timer->start(std::chrono::milliseconds(static_cast<int64_t>(perilog_timeout_ * 1000)), [this, id] {
        auto it = jobs_.find(id);
        if (it == jobs_.end() || !it->second->perilog)
            return;
        it->second->perilog_timed_out = true;
        (void)it->second->perilog->signal(SIGKILL);
    });
}

void ExecService::drain_self(const std::string& reason) {
    uint32_t rank = broker_.bootstrap().rank;
    log::error("exec", "draining rank {}: {}", rank, reason);
    broker_.rpc(Message::request("resource.drain", {{"targets", std::to_string(rank)}, {"reason", reason}}, 0),
                [rank](const Message& resp) {
                    if (resp.errnum)
                        log::error("exec", "rank {} not drained: {}", rank, resp.error_text());
                });
}

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
        // The broker's pid in the name: brokers of other instances on this
        // host (test instances, an instance inside another one's job) share
        // the parent cgroup and can hand out the same job id.
        auto cg = JobCgroup::create(
            fmt::format("{}/banyan-{}-{}-{}", *cgroup_parent_, boot.rank, getpid(), format_jobid(id)));
        if (cg)
            job.cgroup.emplace(std::move(*cg));
        else
            log::warning("exec", "{}: no cgroup ({}); process groups only", format_jobid(id), cg.error().message);
    }
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
    request["broker_uid"] = getuid();
    if (topology_xml_)
        request["topology"] = *topology_xml_;
    if (host_brokers_ > 1)
        request["host_brokers"] = host_brokers_;
    // Its first line waits in the pipe until it runs. Held, the shell of
    // the broker owner's job gets it at once and prepares the job, its
    // tasks waiting for `go`; another user's shell gets it at exec.go (it
    // would prepare as that user: what it makes is not the broker's to
    // remove if the start ends there).
    request.erase("hold");  // (exec.run's own: a prolog runs after exec.go)
    bool prepares = job.held && job.userid == getuid();
    if (prepares)
        request["hold"] = true;
    // The jobspec as exec.run brought it, unparsed: the shell reads it.
    std::string line = LineChannel::line_of(request);
    line.pop_back();
    line.reserve(line.size() + jobspec.size() + 16);
    line += R"(,"jobspec":)";
    line += jobspec;
    line += '}';
    if (job.held && !prepares) {
        job.held_lines.insert(job.held_lines.begin(), std::move(line));
    } else if (prepares) {
        job.channel->send_line(std::move(line));
        job.held_lines.insert(job.held_lines.begin(), R"({"type":"go"})");  // what exec.go sends first
    } else {
        job.channel->send_line(std::move(line));
        send_held_lines(job);  // what came during the prolog
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
                       .cgroup_fd = job.cgroup ? job.cgroup->fd() : -1};
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
        if (!proc && retryable && started_job.cgroup) {
            log::warning("exec", "{}: cannot start the shell in {} ({}); process groups only", format_jobid(id),
                         started_job.cgroup->dir(), proc.error().message);
            started_job.cgroup.reset();
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
    });
}

void ExecService::spawn_shell(JobId id, uint64_t launch, const SpawnOptions& options, ShellStarted started) {
    auto on_exit = [this, id, launch](int status) { on_shell_exit(id, launch, status); };
    if (fork_shells_ && options.argv[0] == shell_path_) {  // not banyan-imp (another user's job)
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
                int code = proc.error().code;  // (EPROTO: the server could not read the request)
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
        std::string note = fmt::format("rank {}: from the shell: {}", broker_.bootstrap().rank, message.error().message);
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
        nlohmann::json body{{"id", id}, {"seq", *seq}, {"rank", rank}, {"nshells", *nshells}, {"data", *data}};
        broker_.rpc(Message::request("exec.fence", body, job.leader), [this, id](const Message& resp) {
            auto j = jobs_.find(id);
            if (j == jobs_.end())
                return;
            auto result = resp.errnum
                              ? Result<nlohmann::json>(make_error(static_cast<int>(resp.errnum), resp.error_text()))
                              : resp.json();
            if (!result || !result->contains("data")) {
                nlohmann::json exception{
                    {"id", id},
                    {"type", "exec"},
                    {"severity", 0},
                    {"note", fmt::format("fence (PMIx or PMI-1): {}", result ? "no data" : result.error().message)}};
                return send_to_job_manager(id, *j->second, {"job-manager.raise", std::move(exception)});
            }
            (*result)["type"] = "fence";
            to_shell(*j->second, std::move(*result));
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
        job.started = true;
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
        if (auto e = first_error(status, time))
            return bad(*e);
        job.status = static_cast<int>(*status);
        job.end_time = *time > 0 ? *time : wall_now();
        // Its tasks and their files are gone (§6): the job ends now, not
        // once the shell's own exit is through (~0.5 ms on the next job's
        // cores).
        on_shell_done(id, std::nullopt);
    } else if (*type == "hello") {  // an adopted shell: whether its tasks all run
        auto started = json_field<bool>(m, "started", false, "shell");
        if (!started)
            return bad(started.error());
        job.started = *started;
        if (job.started && job.answer_to)  // asked for before this line came
            report_started(id);
    } else {
        log::error("exec", "{}: unknown message from the shell: {}", format_jobid(id), m.dump());
    }
}

void ExecService::send_to_job_manager(JobId id, LocalJob& job, ForRank0 message) {
    if (!job.kept.empty())
        return keep(job, std::move(message));  // in order: after what waits already
    Message req = Message::request(message.topic, message.body, 0);
    size_t bytes = message.topic == "job-manager.output" && req.payload ? req.payload->size() : 0;
    // Backpressure: past kOutputInFlightLimit unanswered, the shell's
    // pipe is not read until rank 0 has caught up.
    job.output_in_flight += bytes;
    if (job.output_in_flight > kOutputInFlightLimit && job.channel)
        job.channel->pause_reading();
    broker_.rpc(std::move(req), [this, id, bytes, message = std::move(message)](const Message& resp) mutable {
        auto j = jobs_.find(id);
        if (resp.errnum == EHOSTUNREACH && j != jobs_.end())
            keep(*j->second, std::move(message));  // rank 0 is away: for its return
        else if (resp.errnum)
            log::warning("exec", "{}: {} lost: {}", format_jobid(id), message.topic, resp.error_text());
        if (j == jobs_.end())
            return;
        j->second->output_in_flight -= bytes;
        if (j->second->output_in_flight <= kOutputInFlightLimit / 2 && j->second->channel)
            j->second->channel->resume_reading();
    });
}

void ExecService::keep(LocalJob& job, ForRank0 message) {
    nlohmann::json& body = message.body;
    if (message.topic == "job-manager.output") {
        if (job.output_lost)
            return;
        size_t bytes =
            body.contains("data") && body["data"].is_string() ? body["data"].get_ref<const std::string&>().size() : 0;
        if (job.kept_bytes + bytes > kKeptOutputLimit) {
            job.output_lost = true;
            body["stream"] = "stderr";
            body["data"] = fmt::format(
                "banyan: output lost: more than {} bytes were written on rank {} while rank 0 "
                "could not be reached\n",
                kKeptOutputLimit, broker_.bootstrap().rank);
            body.erase("encoding");
        }
        job.kept_bytes += bytes;
    }
    job.kept.push_back(std::move(message));
}

// This rank's tasks all run (doc/spec/jobs.md section 8).
void ExecService::report_started(JobId id) {
    broker_.rpc(Message::request("job-manager.started", {{"id", id}, {"rank", broker_.bootstrap().rank}}, 0),
                [id](const Message& resp) {
                    if (resp.errnum)
                        log::warning("exec", "{}: start not recorded: {}", format_jobid(id), resp.error_text());
                });
}

void ExecService::on_shell_exit(JobId id, uint64_t launch, int wait_status) {
    auto it = jobs_.find(id);
    if (it == jobs_.end() || it->second->launch != launch)
        return (void)exiting_shells_.erase(launch);  // (allowed: its Subprocess calls this last)
    it->second->channel->read_available();  // its last lines (finish among them) are in the pipe
    on_shell_done(id, wait_status);
}

void ExecService::on_shell_done(JobId id, std::optional<int> wait_status) {
    auto it = jobs_.find(id);
    if (it == jobs_.end() || it->second->shell_done)
        return;
    LocalJob& job = *it->second;
    job.shell_done = true;
    job.held = false;  // a held shell that died: nothing is left to start
    job.on_go = nullptr;
    job.held_lines.clear();
    for (auto& [tag, request] : job.proxied)
        broker_.respond_error(request, ECONNRESET, "the job's shell ended");
    job.proxied.clear();
    if (job.cgroup)
        job.cgroup->kill_all();
    if (job.status)
        return after_epilog(id, [this, id, status = *job.status, time = job.end_time] { finish(id, status, time); });
    std::string note = fmt::format("banyan-shell on rank {} {}", broker_.bootstrap().rank,
                                   describe_wait_status(wait_status.value_or(0)));
    after_epilog(id, [this, id, note] { fail(id, note); });
}

// The job's end is reported once the epilog (if any) has run: until then
// its resources stay allocated, so no next job starts on a node being
// cleaned. A failing epilog drains the node.
void ExecService::after_epilog(JobId id, std::function<void()> then) {
    auto it = jobs_.find(id);
    if (!epilog_ || it == jobs_.end() || it->second->perilog_env.empty())
        return then();
    run_perilog(id, *it->second, "epilog", [this, then](std::optional<std::string> failed) {
        if (failed)
            drain_self(*failed);
        then();
    });
}

// An adopted shell's connection closed: it has exited. One that reported
// finish ended its job then (on_shell_done).
void ExecService::on_adopted_shell_gone(JobId id) {
    auto it = jobs_.find(id);
    if (it == jobs_.end() || it->second->shell_done)
        return;
    fail(id, fmt::format("banyan-shell on rank {} (re-attached) ended without reporting", broker_.bootstrap().rank));
}

void ExecService::fail(JobId id, const std::string& note) {
    auto it = jobs_.find(id);
    if (it == jobs_.end())
        return;
    // Answered once: on rank 0 the answer is handled inside this call, and
    // may come back here (an exception, then exec.terminate).
    if (auto answer_to = std::exchange(it->second->answer_to, std::nullopt))
        broker_.respond_error(*answer_to, EIO, note);
    else
        log::error("exec", "{}: {}", format_jobid(id), note);
    // Not here: this runs inside the shell's own exit callback.
    broker_.reactor().post([this, id] { remove_job(id); });
}

void ExecService::finish(JobId id, int status, double time) {
    auto it = jobs_.find(id);
    if (it == jobs_.end())
        return;
    if (auto answer_to = std::exchange(it->second->answer_to, std::nullopt))  // once (fail)
        broker_.respond(Message::response_to(*answer_to, {{"status", status}, {"time", time}}));
    // Kept whether answered or not: the answer may die with rank 0, and
    // this broker with it (rank 0's own jobs): kept in a file too.
    // Ends are kept for exec.reattach-timeout (EndedShares).
    ended_->add({id, status, time, it->second->started}, std::exchange(it->second->kept, {}));
    broker_.reactor().post([this, id] { remove_job(id); });
    for (auto f = fences_.lower_bound({id, 0}); f != fences_.end() && f->first.first == id;)
        f = fences_.erase(f);
}

void ExecService::remove_job(JobId id) {
    auto it = jobs_.find(id);
    if (it == jobs_.end())
        return;
    std::optional<JobCgroup> cgroup = std::move(it->second->cgroup);
    it->second->cgroup.reset();
    // What the shell (as the job's user) left and this user may remove.
    if (!it->second->tmpdir.empty()) {
        std::error_code ec;
        std::filesystem::remove_all(it->second->tmpdir, ec);
    }
    // A shell that reported finish may still be exiting: it is waited for
    // on the loop, never here.
    if (it->second->shell && it->second->shell->running())
        exiting_shells_[it->second->launch] = std::move(it->second->shell);
    jobs_.erase(it);
    if (!cgroup || cgroup->try_remove())
        return;
    emptying_.push_back({std::move(*cgroup), 50});
    if (!emptying_timer_) {
        emptying_timer_ = std::make_unique<Timer>(broker_.reactor());
        emptying_timer_->start_repeating(std::chrono::milliseconds(2), [this] { retry_cgroup_removal(); });
    }
}

void ExecService::retry_cgroup_removal() {
    for (auto it = emptying_.begin(); it != emptying_.end();) {
        if (it->cgroup.try_remove()) {
            it = emptying_.erase(it);
        } else if (--it->tries_left == 0) {
            log::warning("exec", "cgroup {} still holds processes after SIGKILL; left in place", it->cgroup.dir());
            it = emptying_.erase(it);
        } else {
            ++it;
        }
    }
    if (emptying_.empty())
        emptying_timer_.reset();  // from inside its own callback: the timer copies its function first
}

// Each socket <rundir>/jobs/<id>/reattach.sock is a shell that outlived
// its broker (doc/spec/shell.md §8): connected, it says hello, sends what
// it kept, and goes on as if started here; its end of file is its exit.
void ExecService::adopt_orphaned_shells() {
    std::string dir = broker_.bootstrap().rundir + "/jobs";
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        const std::string name = entry.path().filename().string();
        if (name == "ended" || !entry.is_directory(ec))
            continue;
        auto id = parse_decimal(name, UINT64_MAX, "job id");
        if (!id) {
            log::warning("exec", "{}: {}; ignored", entry.path().string(), id.error().message);
            continue;
        }
        std::string socket = entry.path().string() + "/reattach.sock";
        if (!jobs_.count(*id) && access(socket.c_str(), F_OK) == 0)
            adopt_shell(socket, *id);
    }
}

bool ExecService::adopt_shell(const std::string& path, JobId id) {
    // Not waiting: a shell that hangs with its backlog full must not stop
    // this broker's loop (it is tried again at the next reattach/reconcile).
    auto fd = connect_unix(path, Wait::no);
    if (!fd) {
        if (fd.error().code == EAGAIN) {
            log::warning("exec", "{}: busy; tried again later", path);
            return false;
        }
        if (fd.error().code != ENOENT) {
            // A shell that gave up (or crashed) left its socket behind.
            log::warning("exec", "{}: {}; removed", path, fd.error().message);
            unlink(path.c_str());
        }
        return false;
    }
    ucred peer{};
    socklen_t len = sizeof peer;
    // Only this broker (or banyan-imp, for the job's user) makes the
    // directories in jobs/: the shell must be its directory's owner.
    struct stat dir {};
    std::string job_dir = path.substr(0, path.rfind('/'));
    if (getsockopt(fd->get(), SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || stat(job_dir.c_str(), &dir) != 0 ||
        peer.uid != dir.st_uid) {
        log::warning("exec", "{}: not a shell of the job's user; ignored", path);
        return false;
    }
    UniqueFd write_fd(fcntl(fd->get(), F_DUPFD_CLOEXEC, 0));
    if (!write_fd) {
        log::error("exec", "{}: dup: {}", path, std::strerror(errno));
        return false;
    }
    auto job = std::make_unique<LocalJob>();
    job->adopted_pid = peer.pid;
    job->tmpdir = job_dir;  // removed with the job, as a shell's started here
    job->channel = std::make_unique<LineChannel>(
        broker_.reactor(), fd->release(), write_fd.release(),
        [this, id](Result<nlohmann::json> m) { on_shell_message(id, std::move(m)); },
        [this, id] {
            // Not here: the channel is inside its own callback.
            broker_.reactor().post([this, id] { on_adopted_shell_gone(id); });
        });
    jobs_.emplace(id, std::move(job));
    log::info("exec", "{}: re-attached its shell (pid {})", format_jobid(id), peer.pid);
    return true;
}

// A job manager that started again asks for a job's share here (doc/spec/
// shell.md §8): what rank 0 did not take is sent again, its tasks are
// reported running again, and the answer comes when the share ends, at
// once if it has.
void ExecService::on_reattach(const Message& req) {
    auto body = req.json();
    auto id = body ? json_field<uint64_t>(*body, "id", 0, "exec.reattach") : Result<uint64_t>(body.error());
    if (!id || !body->contains("id"))
        return broker_.respond_error(req, EPROTO, "exec.reattach: expected {\"id\": JOBID}");
    auto it = jobs_.find(*id);
    std::optional<EndedShares::End> ended = it == jobs_.end() ? ended_->find(*id) : std::nullopt;
    if (it == jobs_.end() && !ended &&
        adopt_shell(fmt::format("{}/jobs/{}/reattach.sock", broker_.bootstrap().rundir, *id), *id))
        it = jobs_.find(*id);  // its shell began waiting after this service started
    if (it == jobs_.end()) {
        if (!ended)
            return broker_.respond_error(
                req, ENOENT, fmt::format("{} has nothing here (rank {})", format_jobid(*id), broker_.bootstrap().rank));
        // What it kept goes first: the answer brings the job's finish.
        for (auto& message : ended_->take_kept(*id))  // sent once
            broker_.rpc(Message::request(message.topic, message.body, 0),
                        [id = *id, topic = message.topic](const Message& resp) {
                            if (resp.errnum)
                                log::warning("exec", "{}: {} lost: {}", format_jobid(id), topic, resp.error_text());
                        });
        broker_.respond(
            Message::response_to(req, {{"status", ended->status}, {"time", ended->time}, {"started", ended->started}}));
        return;  // kept until it expires: rank 0 may die again before it stores this
    }
    LocalJob& job = *it->second;
    job.answer_to = req;
    job.answer_to->payload.reset();
    auto kept = std::exchange(job.kept, {});
    job.kept_bytes = 0;
    job.output_lost = false;
    for (auto& message : kept)
        send_to_job_manager(*id, job, std::move(message));
    if (job.started)
        report_started(*id);
}

ExecService::LocalJob* ExecService::job_for(const Message& req, nlohmann::json& body) {
    auto parsed = req.json();
    if (!parsed) {
        broker_.respond_error(req, EPROTO, parsed.error().message);
        return nullptr;
    }
    body = std::move(*parsed);
    auto id = json_field<uint64_t>(body, "id", 0, req.topic);
    if (!id || !body.contains("id")) {
        broker_.respond_error(req, EPROTO, fmt::format("{}: expected {{\"id\": JOBID, ...}}", req.topic));
        return nullptr;
    }
    auto it = jobs_.find(*id);
    if (it == jobs_.end()) {
        broker_.respond_error(req, ENOENT, fmt::format("{} has nothing running here", format_jobid(*id)));
        return nullptr;
    }
    return it->second.get();
}

void ExecService::on_kill(const Message& req) {
    nlohmann::json body;
    LocalJob* job = job_for(req, body);
    if (!job)
        return;
    auto signo = json_field<int64_t>(body, "signal", SIGTERM, "exec.kill");
    if (!signo || *signo < 1 || *signo >= NSIG)
        return broker_.respond_error(req, EPROTO, "exec.kill: expected {\"id\": JOBID, \"signal\": N}");
    broker_.respond(Message::response_to(req, nlohmann::json::object()));
    if (job->simulated)  // a simulated job "dies" of the signal at once
        return finish(body["id"].get<uint64_t>(), 128 + static_cast<int>(*signo), wall_now());
    if (job->held && !job->channel)  // its prolog not started yet: it never will
        return end_held(body["id"].get<uint64_t>(), static_cast<int>(*signo));
    if (!job->channel) {  // in its prolog: it will not start
        job->killed_before_start = static_cast<int>(*signo);
        return;
    }
    to_shell(*job, {{"type", "signal"}, {"signal", *signo}});  // held: once its tasks run
}

void ExecService::on_reconcile(const Message& req) {
    auto body = req.json();
    if (!body || !body->contains("keep") || !(*body)["keep"].is_array())
        return broker_.respond_error(req, EPROTO, "exec.reconcile: expected {\"keep\": [JOBID, ...]}");
    std::set<JobId> keep;
    for (const auto& id : (*body)["keep"])
        if (id.is_number_unsigned())
            keep.insert(id.get<JobId>());
    adopt_orphaned_shells();  // a shell that began waiting after this service started is judged too
    std::vector<JobId> orphans;
    for (const auto& [id, job] : jobs_)
        if (!keep.count(id))
            orphans.push_back(id);
    nlohmann::json killed = nlohmann::json::array();
    for (JobId id : orphans) {
        log::warning("exec", "{}: rank 0 ended this job while rank {} was cut off: killing its tasks", format_jobid(id),
                     broker_.bootstrap().rank);
        killed.push_back(id);
        kill_now(id);
    }
    broker_.respond(Message::response_to(req, {{"killed", killed}}));
}

void ExecService::check_parent() {
    if (broker_.overlay().parent_ready()) {
        cut_off_ = false;
        if (!ended_while_cut_off_.empty())
            report_cut_off_jobs();
        return;
    }
    // Silence is counted from the parent's last word, as the parent counts
    // this rank's (a broker that restarted counts from its own start). A
    // parent that is not rank 0 has this rank lost, and rank 0 its jobs
    // ended, after tbon.lost_timeout; rank 0 itself may be restarting,
    // which its jobs outlive for exec.reattach-timeout (§8).
    const Bootstrap& boot = broker_.bootstrap();
    bool under_rank0 = boot.parent() == 0u;
    double timeout = under_rank0 ? reattach_timeout_ : boot.lost_timeout;
    auto since = std::max(broker_.overlay().parent_last_seen(), started_);
    if (cut_off_ || Clock::now() - since < std::chrono::duration<double>(timeout))
        return;
    cut_off_ = true;
    uint32_t rank = boot.rank;
    std::string why = fmt::format("rank {} has not reached {} for {}s ({})", rank,
                                  under_rank0 ? "rank 0" : fmt::format("its parent (rank {})", *boot.parent()), timeout,
                                  under_rank0 ? "exec.reattach-timeout" : "tbon.lost_timeout");
    for (JobId id : kill_all_jobs(why))
        ended_while_cut_off_.insert(id);
    broker_.overlay().subtree().online.for_each([this, rank, why](uint32_t below) {
        if (below == rank)
            return;
        broker_.rpc(Message::request("exec.cut-off", {{"why", why}}, below), [this, below](const Message& resp) {
            auto body = resp.json();
            auto killed = body && !resp.errnum
                              ? json_field<nlohmann::json>(*body, "killed", nlohmann::json::array(), "exec.cut-off")
                              : Result<nlohmann::json>(make_error(EPROTO, resp.error_text()));
            if (!killed || !killed->is_array())
                return log::warning("exec", "exec.cut-off on rank {}: {}", below,
                                    killed ? "expected killed: [JOBID, ...]" : killed.error().message);
            for (const auto& id : *killed)
                if (id.is_number_unsigned())
                    ended_while_cut_off_.insert(id.get<JobId>());
        });
    });
}

// exec.cut-off {why}: a rank above this one is cut off from its parent;
// the jobs here were ended with it (doc/spec/shell.md §8).
void ExecService::on_cut_off(const Message& req) {
    auto body = req.json();
    auto why = body ? json_field<std::string>(*body, "why", "", "exec.cut-off") : Result<std::string>(body.error());
    if (!why || why->empty())
        return broker_.respond_error(req, EPROTO, "exec.cut-off: expected {\"why\": TEXT}");
    nlohmann::json killed = kill_all_jobs(*why);
    broker_.respond(Message::response_to(req, {{"killed", killed}}));
}

std::vector<JobId> ExecService::kill_all_jobs(const std::string& why) {
    std::vector<JobId> ids;
    for (const auto& [id, job] : jobs_)
        ids.push_back(id);
    for (JobId id : ids) {
        log::warning("exec", "{}: {}: killing its tasks (rank 0 ends the job: node-failure)", format_jobid(id), why);
        kill_now(id);
    }
    return ids;
}

// Back from a cut-off: rank 0 may not have seen it (it was itself stopped,
// or restarting), and the jobs ended here would run on its other ranks.
// Each gets the exception rank 0 would have raised; one it ended already
// refuses it.
void ExecService::report_cut_off_jobs() {
    uint32_t rank = broker_.bootstrap().rank;
    for (JobId id : std::exchange(ended_while_cut_off_, {})) {
        nlohmann::json body{
            {"id", id},
            {"type", "node-failure"},
            {"severity", 0},
            {"note", fmt::format("rank {} was cut off from rank 0: the job's tasks there and below were killed", rank)}};
        broker_.rpc(Message::request("job-manager.raise", body, 0), [id](const Message& resp) {
            if (resp.errnum)
                log::debug("exec", "{}: node-failure not raised: {}", format_jobid(id), resp.error_text());
        });
    }
}

void ExecService::on_terminate(const Message& req) {
    nlohmann::json body;
    LocalJob* job = job_for(req, body);
    if (!job)
        return;
    JobId id = body["id"].get<uint64_t>();
    broker_.respond(Message::response_to(req, nlohmann::json::object()));
    if (job->simulated)
        return finish(id, 128 + SIGTERM, wall_now());
    if (job->held)
        return end_held(id, SIGTERM);
    if (job->escalate)
        return;  // already on its way
    if (!job->channel) {  // in its prolog: it will not start
        job->killed_before_start = SIGTERM;
        return;
    }
    job->channel->send({{"type", "signal"}, {"signal", SIGTERM}});
    job->escalate = std::make_unique<Timer>(broker_.reactor());
    job->escalate->start(kill_timeout_, [this, id] {
        auto it = jobs_.find(id);
        if (it == jobs_.end())
            return;
        kill_now(id);
    });
}

// SIGKILL to the tasks through the shell; if the shell has not ended them
// kShellGrace later, the shell and its cgroup go too.
void ExecService::kill_now(JobId id) {
    auto it = jobs_.find(id);
    if (it == jobs_.end())
        return;
    LocalJob& job = *it->second;
    if (job.simulated)
        return finish(id, 128 + SIGKILL, wall_now());
    if (job.held)
        return end_held(id, SIGKILL);
    if (!job.channel && !job.adopted_pid) {  // in its prolog: it will not start
        job.killed_before_start = SIGKILL;
        return;
    }
    if (job.channel)
        job.channel->send({{"type", "signal"}, {"signal", SIGKILL}});
    if (!job.escalate)
        job.escalate = std::make_unique<Timer>(broker_.reactor());
    job.escalate->start(kShellGrace, [this, id] {
        auto j = jobs_.find(id);
        if (j == jobs_.end())
            return;
        log::warning("exec", "{}: the shell did not end its tasks; killing it", format_jobid(id));
        if (j->second->shell)
            (void)j->second->shell->signal(SIGKILL);
        else if (j->second->adopted_pid > 0)  // not our child; its connection is still open, so the pid is its
            kill(j->second->adopted_pid, SIGKILL);
        if (j->second->cgroup)
            j->second->cgroup->kill_all();
    });
}

void ExecService::on_stdin(const Message& req) {
    nlohmann::json body;
    LocalJob* job = job_for(req, body);
    if (!job)
        return;
    if (!body.contains("data") || !body["data"].is_string())
        return broker_.respond_error(req, EPROTO, "exec.stdin: expected {\"id\", \"data\": STRING, \"eof\"?}");
    // {data, encoding?, eof} is what the shell takes: passed on as it is.
    body.erase("id");
    body["type"] = "stdin";
    to_shell(*job, std::move(body));
    broker_.respond(Message::response_to(req, nlohmann::json::object()));
}

// A request for the nested instance the job runs (doc/spec/instances.md
// §5), from job-manager.proxy: passed to the job's shell on this rank,
// which sends it on as the job's user and answers.
void ExecService::on_proxy(const Message& req) {
    nlohmann::json body;
    LocalJob* job = job_for(req, body);
    if (!job)
        return;
    auto uri = json_field<std::string>(body, "uri", "", "exec.proxy");
    if (!uri)
        return broker_.respond_error(req, EPROTO, uri.error().message);
    if (!job->channel || job->held)
        return broker_.respond_error(req, EAGAIN, "the job's shell is not running here yet");
    uint64_t tag = job->next_proxy_tag++;
    job->proxied.emplace(tag, req);
    job->channel->send(
        {{"type", "proxy"}, {"tag", tag}, {"uri", *uri}, {"request", json_object_at(body, {"request"})}});
}

// At the job's first rank: answered for all shells once all have come.
// A contribution may arrive before this rank's own exec.run: it waits
// here all the same.
void ExecService::on_fence(const Message& req) {
    auto body = req.json();
    if (!body)
        return broker_.respond_error(req, EPROTO, body.error().message);
    auto id = json_field<uint64_t>(*body, "id", 0, "exec.fence");
    auto seq = json_field<uint64_t>(*body, "seq", 0, "exec.fence");
    auto rank = json_field<uint32_t>(*body, "rank", 0, "exec.fence");
    auto nshells = json_field<uint32_t>(*body, "nshells", 1, "exec.fence");
    auto data = json_field<std::string>(*body, "data", "", "exec.fence");
    if (auto e = first_error(id, seq, rank, nshells, data))
        return broker_.respond_error(req, EPROTO, e->message);
    Fence& fence = fences_[{*id, *seq}];
    // The answer, every shell's data in one message, must fit in a
    // message (16 MiB, kDefaultMaxPayload), base64 and JSON included.
    constexpr size_t kFenceDataLimit = size_t{12} << 20;
    fence.bytes += data->size();
    if (fence.bytes > kFenceDataLimit && !fence.failed) {
        fence.failed = true;
        for (const Message& w : fence.waiting)
            broker_.respond_error(w, E2BIG, "the job's fence data is over 12 MiB in all (one message carries it)");
        fence.failed_parts = static_cast<uint32_t>(fence.waiting.size());
        fence.waiting.clear();
        fence.data = nlohmann::json::object();
    }
    if (fence.failed) {
        broker_.respond_error(req, E2BIG, "the job's fence data is over 12 MiB in all (one message carries it)");
        if (++fence.failed_parts >= *nshells)
            fences_.erase({*id, *seq});
        return;
    }
    fence.data[std::to_string(*rank)] = std::move(*data);
    fence.waiting.push_back(req);
    fence.waiting.back().payload.reset();
    if (fence.data.size() < *nshells)
        return;
    for (const Message& w : fence.waiting)
        broker_.respond(Message::response_to(w, {{"seq", *seq}, {"data", fence.data}}));
    fences_.erase({*id, *seq});
}

}  // namespace banyan
