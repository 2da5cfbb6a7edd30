#include "broker/exec/exec_service.hpp"
#include "broker/exec/local_job.hpp"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
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
#include "core/byte_size.hpp"
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
    // Random, not a count kept on disk: a broker that crashed may not
    // have written its last one. (2^62 values: no two starts alike.)
    std::random_device random;
    svc->incarnation_ = ((uint64_t{random()} << 32) | random()) >> 2;
    svc->perilog_timeout_ = *perilog_timeout;
    // Banyan's shell, unless the config names another (as Flux's
    // exec.job-shell: a site's wrapper, or a test's fault).
    auto shell = config.get_string("exec.job-shell", program_path("banyan-shell"));
    if (!shell)
        return shell.error();
    svc->shell_path_ = *shell;
    // Where each user's container images are unpacked on this node, and
    // how large that may grow (doc/spec/shell.md §9.2).
    auto cache = config.get_string("exec.container-cache", "/var/tmp/banyan-images-{uid}");
    auto cache_size = config.get_string("exec.container-cache-size", "20G");
    if (auto e = first_error(cache, cache_size))
        return *e;
    auto cache_bytes = parse_byte_size(*cache_size, BareSize::refused);
    if (!cache_bytes)
        return make_error(EINVAL, fmt::format("exec.container-cache-size: {}", cache_bytes.error().message));
    if (!cache->starts_with("/") || cache->find("{uid}") == std::string::npos)
        return make_error(EINVAL, fmt::format("exec.container-cache: \"{}\": expected an absolute path with {{uid}} "
                                              "in it (each user's images are their own)",
                                              *cache));
    svc->container_cache_ = *cache;
    svc->container_cache_size_ = *cache_bytes;
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
                   "only: what leaves its process group is found through its shell only)");
    }
    // Memory limits (--mem): in the job's own cgroup where the memory
    // controller is given to this broker's children, else under its v1
    // memory cgroup (a hybrid or v1 machine), else nowhere: said once.
    if (svc->cgroup_parent_)
        if (auto control = read_text_file(*svc->cgroup_parent_ + "/cgroup.subtree_control")) {
            std::string words = " " + *control + " ";
            std::replace(words.begin(), words.end(), '\n', ' ');
            svc->unified_memory_ = words.find(" memory ") != std::string::npos;
        }
    if (!svc->unified_memory_ && mounts && own)
        if (auto dir = own_v1_memory_cgroup(*mounts, *own); dir && access(dir->c_str(), W_OK) == 0)
            svc->memory_parent_v1_ = *dir;
    if (svc->unified_memory_)
        log::info("exec", "jobs' memory (--mem) is limited in their cgroups under {}", *svc->cgroup_parent_);
    else if (svc->memory_parent_v1_)
        log::info("exec", "jobs' memory (--mem) is limited in cgroup v1 memory cgroups under {}",
                  *svc->memory_parent_v1_);
    else
        log::write(svc->imp_path_ ? log::Level::warning : log::Level::info, "exec",
                   "no memory controller this broker may use (cgroup v2 memory for its children, or a writable "
                   "v1 memory cgroup): jobs' memory (--mem) is scheduled but not limited here");
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
    broker.register_method("exec.fence-data", true, [s](const Message& r) { s->on_fence_data(r); });
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
    if (broker_.keeps_jobs()) {
        leave_shells_running();
        return;
    }
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

// The broker stops keeping its jobs (overlay.md §9): each shell's pipe
// closes without `end`, so the shell keeps its tasks running and waits to
// be re-attached (shell.md §8); its cgroups and run directory stay. A held
// job (no task started) ends here as after a crash: its shell goes. A job
// whose tasks have ended (its epilog runs, cut short here) has its end
// kept as finish() keeps it, for the exec.reattach of the broker that
// starts next.
void ExecService::leave_shells_running() {
    size_t left = 0;
    for (auto& [id, job] : jobs_) {
        if (job->phase == LocalJob::Phase::held)
            continue;
        if (job->phase == LocalJob::Phase::ending) {
            if (job->status && !job->over)
                ended_->add({id, *job->status, job->end_time, job->tasks_ran, job->usage, job->alloc},
                            std::exchange(job->kept, {}));
            std::error_code ec;
            if (!job->tmpdir.empty())
                std::filesystem::remove_all(job->tmpdir, ec);
            continue;
        }
        job->channel.reset();
        if (job->shell) {
            job->shell->disown();
            ++left;
        }
        left += job->adopted_pid != 0;
        if (job->cgroup)
            job->cgroup->keep();
        if (job->memory_cgroup)
            job->memory_cgroup->keep();
    }
    if (left)
        log::info("exec", "leaving {} job shells running, to be re-attached", left);
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
    auto credential = json_field<std::string>(p, "J", "", "exec.run");
    auto hold = json_field<bool>(p, "hold", false, "exec.run");
    auto alloc = json_field<double>(p, "alloc", 0, "exec.run");
    if (auto e = first_error(credential, hold, alloc))
        return broker_.respond_error(req, EPROTO, e->message);
    if (auto old = jobs_.find(*id); old != jobs_.end() && old->second->over)
        remove_job(*id);  // its last run ended and was answered; its removal had not yet come
    else if (old != jobs_.end() && is_phantom(*old->second, *alloc))
        end_phantom(*id, "replaced by this one");
    if (jobs_.count(*id))
        return broker_.respond_error(req, EEXIST, fmt::format("{} already runs here", format_jobid(*id)));
    std::optional<EbpfRequest> ebpf;
    if (p.contains("ebpf")) {
        auto asked = read_ebpf_request(json_object_at(p, {"ebpf"}));
        if (!asked)
            return broker_.respond_error(req, EPROTO, asked.error().message);
        ebpf = std::move(*asked);
    }
    if (*userid != getuid() && !imp_path_)
        return broker_.respond_error(req, EPERM,
                                     fmt::format("cannot run tasks as uid {}: this broker runs as uid {} and has no "
                                                 "exec.imp to start jobs as their users",
                                                 *userid, getuid()));
    auto job = std::make_unique<LocalJob>();
    job->launch = ++launches_;
    job->alloc = *alloc;
    job->userid = *userid;
    job->credential = *credential;
    job->ebpf = std::move(ebpf);
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
        job->phase = LocalJob::Phase::running;
        job->tasks_ran = true;
        jobs_.emplace(*id, std::move(job));
        return report_started(*id);
    }
    job->phase = *hold ? LocalJob::Phase::held : LocalJob::Phase::starting;
    auto R = p.contains("R") ? Rv1::from_json(p["R"]) : Result<Rv1>(make_error(EPROTO, "exec.run: no R"));
    if (!R || R->ranks.empty())
        return broker_.respond_error(req, EPROTO, R ? "exec.run.R: no ranks" : R.error().message);
    job->leader = R->ranks.begin()->first;
    if (auto mine = R->ranks.find(broker_.bootstrap().rank); mine != R->ranks.end())
        job->memory_limit = mine->second.memory;
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
    if (prolog_ && j.phase == LocalJob::Phase::held) {
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
    auto alloc = json_field<double>(body, "alloc", 0, "exec.go");
    if (!alloc)
        return broker_.respond_error(req, EPROTO, alloc.error().message);
    JobId id = json_field<uint64_t>(body, "id", 0, "exec.go").value_or(0);  // (read by job_for)
    if (is_phantom(*job, *alloc))
        return broker_.respond_error(req, ENOENT,
                                     fmt::format("{}: the start held here is another run's", format_jobid(id)));
    if (req.wants_response())  // rank 0's ask_again() waits for it; its launch does not
        broker_.respond(Message::response_to(req, nlohmann::json::object()));
    go(id, *job);
}

// A start held for an alloc that is not `alloc`: rank 0 died before that
// one reached its disk, and its next process allocated the job anew.
bool ExecService::is_phantom(const LocalJob& job, double alloc) {
    return job.phase == LocalJob::Phase::held && alloc > 0 && job.alloc > 0 && job.alloc != alloc;
}

void ExecService::end_phantom(JobId id, std::string_view how) {
    log::warning("exec", "{}: a start held for an alloc that rank 0 never stored is {}", format_jobid(id), how);
    end_held(id, SIGKILL);
    remove_job(id);
}

void ExecService::go(JobId id, LocalJob& job) {
    if (job.phase != LocalJob::Phase::held)
        return;
    job.phase = LocalJob::Phase::starting;
    release_lines(id, job);
    if (auto then = std::exchange(job.on_go, nullptr))
        then();
}

// Lines to a shell go out in order: none before its first (the job's,
// after the prolog), none before the shell runs, none between its first
// and `go` (held).
void ExecService::to_shell(LocalJob& job, const nlohmann::json& message) {
    to_shell_line(job, LineChannel::line_of(message));
}

void ExecService::to_shell_line(LocalJob& job, std::string line) {
    if (job.channel && job.phase != LocalJob::Phase::held && (job.shell || job.adopted_pid))
        job.channel->send_line(std::move(line));
    else if (job.phase != LocalJob::Phase::ending && !job.simulated)
        job.held_lines.push_back(std::move(line));
}

// The line that lets the tasks start (the job's, or `go`) goes to a shell
// that runs, once it is no longer held; the `go` line of ended_ is written
// first (doc/spec/shell.md §8): written for a shell not yet started, a
// broker that died before it started would say the tasks may have run,
// and written after, the tasks could run unsaid.
void ExecService::release_lines(JobId id, LocalJob& job) {
    if (job.phase != LocalJob::Phase::starting || !job.channel || !(job.shell || job.adopted_pid))
        return;
    if (!std::exchange(job.let_go, true))
        ended_->let_go(id, job.alloc);
    send_held_lines(job);
}

void ExecService::send_held_lines(LocalJob& job) {
    for (auto& line : std::exchange(job.held_lines, {}))
        job.channel->send_line(std::move(line));
}

// A held job ends before any task of it ran: its shell, waiting for `go`
// (or its first line), is killed with whatever it left in its cgroup.
void ExecService::end_held(JobId id, int signo) {
    LocalJob& job = *jobs_.at(id);
    if (job.phase == LocalJob::Phase::ending)
        return;
    job.phase = LocalJob::Phase::ending;
    job.on_go = nullptr;
    job.held_lines.clear();
    if (job.shell)
        (void)job.shell->signal(SIGKILL);
    if (job.cgroup)
        job.cgroup->kill_all();
    finish(id, 128 + signo, wall_now());
}

void ExecService::send_to_job_manager(JobId id, LocalJob& job, ForRank0 message) {
    // Named once, when made (whatever the shell wrote there): sent again
    // (kept for a rank 0 that was away), it keeps its name.
    if (message.topic == "job-manager.output" && !message.named)
        name_chunk(message);
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
    if (message.topic == "job-manager.output") {
        bool lost_before = job.kept_output.lost();
        if (!job.kept_output.admit(
                message.body, fmt::format("on rank {} while rank 0 could not be reached", broker_.bootstrap().rank)))
            return;
        // Rewritten into the notice: a new chunk, not the one rank 0 may
        // have stored already.
        if (!lost_before && job.kept_output.lost())
            name_chunk(message);
    }
    job.kept.push_back(std::move(message));
}

void ExecService::name_chunk(ForRank0& message) {
    message.body["chunk"] = {broker_.bootstrap().rank, incarnation_, ++output_chunks_};
    message.named = true;
}

// This rank's tasks all run (doc/spec/jobs.md section 8): an answer to
// the job's exec.run before its last, where exec.run came as a stream (a
// multicast's, overlay.md §10.1: it goes up with other ranks' answers),
// else job-manager.started, without an answer (one report a rank, and an
// answer would cross the tree again). One lost with rank 0 is made up for
// when rank 0 re-attaches the job (report_started() again).
void ExecService::report_started(JobId id) {
    auto it = jobs_.find(id);
    if (it != jobs_.end() && it->second->answers_a_stream())
        return broker_.respond(Message::response_to(*it->second->answer_to, {{"started", true}}));
    broker_.send(Message::request("job-manager.started", {{"id", id}, {"rank", broker_.bootstrap().rank}}, 0));
}

// An adopted shell's connection closed: it has exited. One that reported
// finish ended its job then (on_shell_done).
void ExecService::on_adopted_shell_gone(JobId id) {
    auto it = jobs_.find(id);
    if (it == jobs_.end() || it->second->phase == LocalJob::Phase::ending)
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
    it->second->over = true;
    remove_soon(id, it->second->launch);
}

void ExecService::finish(JobId id, int status, double time) {
    auto it = jobs_.find(id);
    if (it == jobs_.end())
        return;
    if (auto answer_to = std::exchange(it->second->answer_to, std::nullopt)) {  // once (fail)
        Message answer = Message::response_to(
            *answer_to, {{"status", status}, {"time", time}, {"usage", it->second->usage.to_json()}});
        answer.flags &= ~msgflag::streaming;  // the last answer, of a stream too (report_started)
        broker_.respond(std::move(answer));
    }
    // Kept whether answered or not: the answer may die with rank 0, and
    // this broker with it (rank 0's own jobs): kept in a file too.
    // Ends are kept for exec.reattach-timeout (EndedShares).
    ended_->add({id, status, time, it->second->tasks_ran, it->second->usage, it->second->alloc},
                std::exchange(it->second->kept, {}));
    // Kept: the shell, waiting with its finish until it knows (doc/spec/
    // shell.md §3), may exit. One that dies first keeps it for the next
    // broker.
    if (it->second->channel)
        it->second->channel->send({{"type", "done"}});
    it->second->over = true;
    remove_soon(id, it->second->launch);
    for (auto f = fences_.lower_bound({id, 0}); f != fences_.end() && f->first.first == id;)
        f = fences_.erase(f);
}

void ExecService::remove_soon(JobId id, uint64_t launch) {
    broker_.reactor().post([this, id, launch] {
        if (auto it = jobs_.find(id); it != jobs_.end() && it->second->launch == launch)  // (not a later run's)
            remove_job(id);
    });
}

void ExecService::remove_job(JobId id) {
    auto it = jobs_.find(id);
    if (it == jobs_.end())
        return;
    // Ended by a way that did not untrack it (a held start ended): the
    // profiler forgets it too.
    if (it->second->ebpf_tracked && profiler_)
        profiler_->ask({{"op", "untrack"}, {"job", id}}, [](Result<nlohmann::json>) {});
    std::optional<JobCgroup> cgroups[] = {std::move(it->second->cgroup), std::move(it->second->memory_cgroup)};
    it->second->cgroup.reset();
    it->second->memory_cgroup.reset();
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
    for (auto& cgroup : cgroups)
        if (cgroup && !cgroup->try_remove())
            emptying_.push_back({std::move(*cgroup), Clock::now()});
    if (!emptying_.empty()) {
        if (!emptying_timer_)
            emptying_timer_ = std::make_unique<Timer>(broker_.reactor());
        emptying_timer_->start(std::chrono::milliseconds(2), [this] { retry_cgroup_removal(); });
    }
}

void ExecService::retry_cgroup_removal() {
    constexpr std::chrono::milliseconds kQuickly(100), kGiveUp(60000);
    auto now = Clock::now();
    bool any_young = false;
    for (auto it = emptying_.begin(); it != emptying_.end();) {
        if (it->cgroup.try_remove()) {
            it = emptying_.erase(it);
        } else if (now - it->since >= kGiveUp) {
            log::warning("exec", "cgroup {} still holds processes a minute after SIGKILL; left in place",
                         it->cgroup.dir());
            it = emptying_.erase(it);
        } else {
            any_young = any_young || now - it->since < kQuickly;
            ++it;
        }
    }
    if (emptying_.empty())
        return emptying_timer_.reset();  // from inside its own callback: the timer copies its function first
    emptying_timer_->start(any_young ? std::chrono::milliseconds(2) : std::chrono::milliseconds(100),
                           [this] { retry_cgroup_removal(); });
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
    if (job->phase == LocalJob::Phase::held && !job->channel)  // its prolog not started yet: it never will
        return end_held(body["id"].get<uint64_t>(), static_cast<int>(*signo));
    if (!job->channel) {  // in its prolog: it will not start
        job->killed_before_start = static_cast<int>(*signo);
        return;
    }
    to_shell(*job, {{"type", "signal"}, {"signal", *signo}});  // held: once its tasks run
}

void ExecService::on_terminate(const Message& req) {
    nlohmann::json body;
    LocalJob* job = job_for(req, body);
    if (!job)
        return;
    JobId id = body["id"].get<uint64_t>();
    // A preemption's own signal and grace (sched.md §9).
    auto signo = json_field<int64_t>(body, "signal", SIGTERM, "exec.terminate");
    auto grace = json_field<double>(body, "grace", -1, "exec.terminate");
    if (auto e = first_error(signo, grace))
        return broker_.respond_error(req, EPROTO, e->message);
    if (*signo < 1 || *signo >= NSIG || *grace > 86400)
        return broker_.respond_error(req, EINVAL, "exec.terminate: expected a signal number and a grace of 0 to 86400 s");
    int sig = static_cast<int>(*signo);
    auto kill_after = *grace >= 0 ? std::chrono::milliseconds(static_cast<int64_t>(*grace * 1000)) : kill_timeout_;
    broker_.respond(Message::response_to(req, nlohmann::json::object()));
    if (job->simulated)
        return finish(id, 128 + sig, wall_now());
    if (job->phase == LocalJob::Phase::held)
        return end_held(id, sig);
    if (job->escalate)
        return;           // already on its way
    if (!job->channel) {  // in its prolog: it will not start
        job->killed_before_start = sig;
        return;
    }
    job->channel->send({{"type", "signal"}, {"signal", sig}});
    job->escalate = std::make_unique<Timer>(broker_.reactor());
    job->escalate->start(kill_after, [this, id] {
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
    if (job.phase == LocalJob::Phase::held)
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

}  // namespace banyan
