#include "shell/shell.hpp"

#include <filesystem>

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "core/base64.hpp"
#include "core/duration.hpp"
#include "core/io_data.hpp"
#include "core/json_field.hpp"
#include "core/json_parse.hpp"
#include "core/log.hpp"
#include "core/text_file.hpp"
#include "core/unix_socket.hpp"
#include "shell/binding.hpp"

namespace banyan {
namespace {

constexpr auto kDrainLimit = std::chrono::seconds(5);

// Where POSIX shared memory and named semaphores live (glibc).
constexpr const char* kSharedMemoryDir = "/dev/shm";
// Output queued for the exec service beyond which the tasks' pipes are no
// longer read (until the queue empties): a task writing faster than its
// output can travel waits in write() instead of filling this shell's memory.
constexpr size_t kOutputQueueLimit = size_t{4} << 20;

// What the tasks used on this node (doc/spec/accounting.md §1): the CPU
// time (user and system) of every process this shell waited for (tasks,
// their children that they waited for, orphans it reaped) and the largest
// resident set any one of them had, in bytes.
nlohmann::json task_usage() {
    rusage ru{};
    if (getrusage(RUSAGE_CHILDREN, &ru) != 0)
        return {{"cpu", 0}, {"maxrss", 0}};
    auto seconds = [](const timeval& t) {
        return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
    };
    return {{"cpu", seconds(ru.ru_utime) + seconds(ru.ru_stime)},
            {"maxrss", static_cast<uint64_t>(ru.ru_maxrss) * 1024}};
}

// Every child of this process (tasks, and orphans it reaped as subreaper).
std::set<pid_t> children_of_self() {
    std::set<pid_t> out;
    DIR* dir = opendir("/proc/self/task");
    if (!dir)
        return out;
    while (dirent* e = readdir(dir)) {
        if (e->d_name[0] == '.')
            continue;
        for (pid_t pid : read_pid_list(fmt::format("/proc/self/task/{}/children", e->d_name)))
            out.insert(pid);
    }
    closedir(dir);
    return out;
}

// `env` with each variable once, its last value: what the shell sets
// (OMPI_MCA_* for its PMIx server) replaces what the job brought along
// (a job submitted from inside another job, or a nested instance).
std::vector<std::string> last_of_each_name(std::vector<std::string> env) {
    std::set<std::string_view> seen;
    std::vector<std::string> out;
    out.reserve(env.size());
    for (auto it = env.rbegin(); it != env.rend(); ++it)
        if (seen.insert(std::string_view(*it).substr(0, it->find('='))).second)
            out.push_back(std::move(*it));
    std::reverse(out.begin(), out.end());
    return out;
}

// The exec service's saved topology, or this shell's own discovery where
// there is none or it cannot be read; nullptr when hwloc does not describe
// this machine.
std::unique_ptr<MachineTopology> machine_topology(const std::string& xml) {
    if (!xml.empty()) {
        auto saved = MachineTopology::load_xml(xml);
        if (saved)
            return std::move(*saved);
        log::warning("shell", "{}; discovering it", saved.error().message);
    }
    return MachineTopology::discover();
}

}  // namespace

Shell::Shell(Reactor& reactor, int in_fd, int out_fd, std::optional<nlohmann::json> signed_jobspec, UniqueFd user_lock)
    : reactor_(reactor),
      signed_jobspec_(std::move(signed_jobspec)),
      user_lock_(std::move(user_lock)),
      reattach_timer_(reactor),
      socket_check_(reactor),
      exit_timer_(reactor),
      drain_timer_(reactor) {
    open_channel(in_fd, out_fd);
}

void Shell::open_channel(int in_fd, int out_fd) {
    channel_ = std::make_unique<LineChannel>(
        reactor_, in_fd, out_fd, [this](Result<nlohmann::json> m) { on_message(std::move(m)); },
        [this] { on_exec_service_gone(); });
    channel_->on_drained([this] {
        if (!output_paused_)
            return;
        output_paused_ = false;
        for (auto& t : tasks_)
            t->resume_output();
    });
}

void Shell::send(nlohmann::json message) {
    if (channel_)
        return channel_->send(message);
    if (json_field<std::string>(message, "type", "").value_or("") == "output" &&
        !kept_output_.admit(message, "while the broker was away"))
        return;
    kept_.push_back(std::move(message));
}

Shell::~Shell() {
    tasks_.clear();
    release_job_files();
}

void Shell::release_job_files() {
    pmix_.reset();
    for (auto& [path, fd] : output_files_)
        close(fd);
    output_files_.clear();
    // The job's run directory holds what its tasks and PMIx left, as the
    // job's user: only this shell may remove it (the exec service removes
    // the directory itself). The socket a broker re-attaches through stays
    // while it waits for one (stop_waiting removes it).
    if (job_ && !job_->tmpdir.empty()) {
        std::error_code ec;
        for (const auto& entry : std::filesystem::directory_iterator(job_->tmpdir, ec))
            if (!listen_fd_ || entry.path() != reattach_socket_)
                std::filesystem::remove_all(entry.path(), ec);
    }
}

void Shell::clean_user_shm() {
    if (!user_lock_)
        return;
    // Shared by every running shell of the user here: whoever takes it
    // alone is the last. Two ending at once both let go first, so one of
    // them gets it; a starting one waits in banyan-imp until this is done.
    (void)flock(user_lock_.get(), LOCK_UN);
    // Never root's (allow-root): system daemons keep theirs there.
    bool last = getuid() != 0 && flock(user_lock_.get(), LOCK_EX | LOCK_NB) == 0;
    if (last) {
        const uid_t user = getuid();
        std::error_code ec;
        size_t removed = 0;
        for (const auto& entry : std::filesystem::directory_iterator(kSharedMemoryDir, ec)) {
            struct stat st {};
            if (lstat(entry.path().c_str(), &st) != 0 || st.st_uid != user)
                continue;
            std::error_code failed;
            std::filesystem::remove_all(entry.path(), failed);  // (never follows a link)
            if (failed)
                log::warning("shell", "{}: {}", entry.path().string(), failed.message());
            else
                removed++;
        }
        if (removed)
            log::debug("shell", "removed {} of the user's entries in {}", removed, kSharedMemoryDir);
    }
    user_lock_.reset();
}

void Shell::on_message(Result<nlohmann::json> message) {
    if (!message && !job_ && !finishing_)  // the job's line: no job to run
        return refuse_job("the job's line: " + message.error().message);
    if (!message) {
        log::error("shell", "from the exec service: {}", message.error().message);
        return;
    }
    const nlohmann::json& m = *message;
    if (json_field<std::string>(m, "type", "").value_or("") == "end") {
        ending_ = true;
        return;
    }
    if (json_field<std::string>(m, "type", "").value_or("") == "done") {
        if (unacked_finish_) {  // the end is kept: this shell is done (the end of file that follows too)
            unacked_finish_.reset();
            finish_kept_ = true;
            exit_code_ = 0;
            reactor_.stop();
        }
        return;
    }
    if (!job_) {
        if (!finishing_)
            start(m);
        return;
    }
    auto typed = json_field<std::string>(m, "type", "", "exec service");
    auto signo = json_field<int64_t>(m, "signal", 0, "exec service");
    if (auto e = first_error(typed, signo))
        return log::error("shell", "{}: {}", format_jobid(job_->id), e->message);
    const std::string& type = *typed;
    if (type == "go") {
        if (std::exchange(held_, false))
            launch();
        return;
    }
    if (type == "ebpf")
        return on_ebpf_answer(m);
    if (type == "signal" && *signo > 0 && *signo < NSIG) {
        // Ended while its containers are being made: no task starts.
        int n = static_cast<int>(*signo);
        bool ends = n == SIGKILL || n == SIGTERM || n == SIGINT || n == SIGHUP;
        if (ends && !started_ && !finishing_ && containers_ && !containers_->ready())
            return launch_failed(make_error(EINTR, fmt::format("signal {} came while its container was made", n)));
        if (ends && !started_ && !finishing_ && ebpf_ == Ebpf::waiting) {
            ebpf_ = Ebpf::off;
            launch_waits_for_ebpf_ = false;
            return launch_failed(
                make_error(EINTR, fmt::format("signal {} came while the profiler was being readied", n)));
        }
        signal_tasks(n);
    } else if (type == "stdin") {
        auto data = io_data(m, "stdin");
        auto eof = json_field<bool>(m, "eof", false, "stdin");
        auto rows = json_field<uint16_t>(json_object_at(m, {"winsize"}), "rows", 0, "stdin.winsize");
        auto cols = json_field<uint16_t>(json_object_at(m, {"winsize"}), "cols", 0, "stdin.winsize");
        if (auto e = first_error(data, eof, rows, cols))
            return log::error("shell", "{}: {}", format_jobid(job_->id), e->message);
        for (auto& t : tasks_) {
            if (t->rank() != 0)
                continue;
            if (*rows > 0 && *cols > 0)
                t->set_window_size(*rows, *cols);
            t->write_stdin(std::move(*data), *eof);
        }
    } else if (type == "fence") {
        on_fence_result(m);
    } else if (type == "proxy") {
        on_proxy_request(m);
    } else {
        log::error("shell", "{}: unknown message from the exec service: {}", format_jobid(job_->id), m.dump());
    }
}

// The broker is gone. Stopping (it said `end`), or before the job began:
// no task may outlive it. Dead: the tasks go on, and this shell waits for
// a broker to come back and re-attach it.
void Shell::on_exec_service_gone() {
    if (finish_kept_)
        return;  // `done` came: this shell is exiting
    // (Held, or waiting for the profiler's word: no task ever ran.)
    if (ending_ || !job_ || held_ || ebpf_ == Ebpf::waiting || reattach_socket_.empty()) {
        kill_everything();
        exit_code_ = 1;
        return reactor_.stop();
    }
    // What was still on its way goes first to the next exec service; a
    // finish not acknowledged may not have been read.
    for (const auto& line : channel_->take_unsent())
        if (auto m = parse_json(line);
            m && !(unacked_finish_ && json_field<std::string>(*m, "type", "").value_or("") == "finish"))
            kept_.push_back(std::move(*m));
    if (auto finish = std::exchange(unacked_finish_, std::nullopt))
        kept_.push_back(std::move(*finish));
    channel_.reset();  // allowed: this is its close callback
    wait_for_broker();
}

void Shell::wait_for_broker() {
    mkdir(job_->tmpdir.c_str(), 0700);  // there already, unless this rank has no task
    auto fd = listen_unix(reattach_socket_, 4);
    if (!fd) {
        log::error("shell", "{}: the broker is gone and {}: ending the tasks", format_jobid(job_->id),
                   fd.error().message);
        kill_everything();
        exit_code_ = 1;
        return reactor_.stop();
    }
    listen_fd_ = std::move(*fd);
    struct stat own {};
    stat(reattach_socket_.c_str(), &own);
    // Removed (the run directory was wiped): no broker can find this shell.
    socket_check_.start_repeating(std::chrono::seconds(1), [this, inode = own.st_ino] {
        struct stat now {};
        if (stat(reattach_socket_.c_str(), &now) == 0 && now.st_ino == inode)
            return;
        give_up("its socket was removed");
    });
    accept_watch_ = std::make_unique<FdWatcher>(reactor_, listen_fd_.get(), FdWatcher::Event::readable,
                                                [this] { on_broker_connecting(); });
    reattach_timer_.start(std::chrono::milliseconds(static_cast<int64_t>(reattach_timeout_ * 1000)), [this] {
        give_up(fmt::format("no broker came back within {}s (exec.reattach-timeout)", reattach_timeout_));
    });
}

void Shell::give_up(const std::string& why) {
    log::error("shell", "{}: {}: ending the tasks", format_jobid(job_->id), why);
    stop_waiting();
    kill_everything();
    exit_code_ = 1;
    reactor_.stop();
}

void Shell::stop_waiting() {
    reattach_timer_.cancel();
    socket_check_.cancel();
    accept_watch_.reset();
    if (listen_fd_) {
        listen_fd_.reset();
        unlink(reattach_socket_.c_str());
    }
}

void Shell::on_broker_connecting() {
    int fd = accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    ucred peer{};
    socklen_t len = sizeof peer;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 ||
        (peer.uid != getuid() && peer.uid != broker_uid_)) {
        close(fd);  // only a broker of the instance's user may take the job
        return;
    }
    stop_waiting();
    attach_channel(fd);
}

// A broker re-attached: it hears hello, then everything kept, in order.
void Shell::attach_channel(int fd) {
    open_channel(fd, fcntl(fd, F_DUPFD_CLOEXEC, 0));
    channel_->send({{"type", "hello"}, {"id", job_->id}, {"started", started_}});
    std::optional<nlohmann::json> finish;
    for (auto& m : kept_) {
        channel_->send(m);
        if (json_field<std::string>(m, "type", "").value_or("") == "finish")
            finish = m;
    }
    kept_.clear();
    kept_output_.reset();
    log::info("shell", "{}: re-attached to a broker", format_jobid(job_->id));
    if (finishing_) {  // the finish was among them
        channel_->flush();
        if (finish_acked_ && finish) {
            unacked_finish_ = std::move(finish);  // its `done` ends this shell
            return;
        }
        exit_code_ = 0;
        reactor_.stop();
    }
}

void Shell::start(const nlohmann::json& request) {
    // Started by banyan-imp: what runs is what the user signed, whatever
    // the request says.
    nlohmann::json message = request;
    if (signed_jobspec_)
        message["jobspec"] = *signed_jobspec_;
    auto job = ShellJob::parse(message);
    if (!job)
        return refuse_job(job.error().message);
    job_ = std::move(*job);
    // {{user}} in an output name (Slurm's %u): the job runs as its user,
    // looked up only when asked for (it may be a directory service's).
    std::string user;
    if ((job_->options.stdout_path + job_->options.stderr_path).find("{{user}}") != std::string::npos) {
        const passwd* pw = getpwuid(getuid());
        user = pw ? pw->pw_name : std::to_string(getuid());
    }
    job_->expand_job_templates(user);
    if (json_field<bool>(message, "ebpf", false, "job").value_or(false))
        ebpf_ = Ebpf::waiting;
    finish_acked_ = json_field<bool>(message, "finish_ack", false, "job").value_or(false);
    auto socket = json_field<std::string>(message, "reattach_socket", "", "job");
    auto timeout = json_field<double>(message, "reattach_timeout", 300, "job");
    auto broker_uid = json_field<uint32_t>(message, "broker_uid", getuid(), "job");
    if (socket && timeout && broker_uid) {
        reattach_socket_ = *socket;
        reattach_timeout_ = *timeout;
        broker_uid_ = *broker_uid;
    }
    // The submitter's umask (banyan submit records it), for the files the
    // tasks and the shell make.
    auto mask = json_field<std::string>(json_object_at(message, {"jobspec", "attributes", "system"}), "umask", "",
                                        "attributes.system");
    if (mask && !mask->empty()) {
        char* end = nullptr;
        unsigned long value = std::strtoul(mask->c_str(), &end, 8);
        if (*end == '\0' && value <= 0777)
            umask(static_cast<mode_t>(value));
    }
    auto ready = prepare();
    if (!ready)
        return launch_failed(ready.error());
    // Held (shell.md §7): ready, but no task before the job's alloc is on
    // disk, which `go` says.
    auto hold = json_field<bool>(message, "hold", false, "job");
    if (!hold)
        return launch_failed(hold.error());
    if (*hold) {
        held_ = true;
        return;
    }
    launch();
}

// A job this shell cannot read: an exception and `finish` with status 1,
// and the shell exits (nothing was started).
void Shell::refuse_job(const std::string& why) {
    finishing_ = true;
    raise("exec", why, 0);
    channel_->send({{"type", "finish"}, {"status", 1}, {"time", wall_now()}});
    channel_->flush();
    exit_code_ = 0;
    reactor_.stop();
}

// The profiler counts this job's processes from now on, or cannot: then
// the start fails, or (`optional`) the tasks run unprofiled, and say why.
void Shell::on_ebpf_answer(const nlohmann::json& m) {
    if (ebpf_ != Ebpf::waiting)
        return;
    auto error = json_field<std::string>(m, "error", "", "ebpf");
    auto optional = json_field<bool>(m, "optional", false, "ebpf");
    if (auto e = first_error(error, optional)) {
        error = e->message;
        optional = false;
    }
    ebpf_ = error->empty() ? Ebpf::counting : Ebpf::off;
    bool launch_now = std::exchange(launch_waits_for_ebpf_, false) && !finishing_ && !started_;
    if (!error->empty() && !*optional) {
        if (launch_now)
            launch_failed(make_error(ENOTSUP, *error));
        else
            failed_ebpf_ = *error;
        return;
    }
    if (!error->empty())
        emit_output(job_->local.first_task, true,
                    fmt::format("banyan: {}; the job runs unprofiled here (optional)\n", *error));
    if (launch_now)
        launch();
}

void Shell::launch() {
    // Profiled: not before the profiler counts the shell's children.
    if (ebpf_ == Ebpf::waiting) {
        launch_waits_for_ebpf_ = true;
        return;
    }
    if (!failed_ebpf_.empty())
        return launch_failed(make_error(ENOTSUP, failed_ebpf_));
    // In containers: their holders first (an image may take seconds to
    // unpack), then the tasks, inside.
    // (A rank with no task of the job here makes no container.)
    if (!job_->options.container_image.empty() && job_->local.ntasks > 0 && !(containers_ && containers_->ready())) {
        if (containers_)
            return;  // (a second `go`)
        auto made = JobContainers::start(reactor_, *job_, [this](Result<void> ready) {
            if (finishing_ || started_)
                return;  // (ended meanwhile)
            if (!ready)
                return launch_failed(ready.error());
            launch();
        });
        if (!made)
            return launch_failed(made.error());
        containers_ = std::move(*made);
        return;
    }
    auto ready = launch_tasks();
    if (!ready)
        return launch_failed(ready.error());
    started_ = true;
    if (ebpf_ == Ebpf::counting) {  // which child is which rank
        nlohmann::json pids = nlohmann::json::array();
        for (const auto& t : tasks_)
            pids.push_back({t->pgid(), t->rank()});
        send({{"type", "ebpf-tasks"}, {"tasks", std::move(pids)}});
    }
    send({{"type", "started"}});
    on_task_change();  // none left already: finish at once
}

void Shell::launch_failed(const Error& why) {
    raise("exec", why.message, 0);
    failed_status_ = std::max(failed_status_, 1);
    on_task_change();  // no task, or none started: finish at once
}

Result<void> Shell::prepare() {
    // Whatever a task leaves behind (a daemon, a setsid() child) becomes
    // this shell's child instead of init's, so it can be found and ended.
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    // Soft limits only, capped by the hard ones: a task may still raise
    // them as far as the broker's hard limits allow.
    for (auto [resource, value] : job_->options.rlimits) {
        rlimit limit{};
        getrlimit(resource, &limit);
        limit.rlim_cur = limit.rlim_max == RLIM_INFINITY ? value : std::min(value, limit.rlim_max);
        if (setrlimit(resource, &limit) != 0)
            return make_error(errno, fmt::format("rlimit {}: {}", resource, std::strerror(errno)));
    }
    if (job_->local.ntasks == 0)
        return {};
    mkdir(job_->tmpdir.c_str(), 0700);
    topology_ = machine_topology(job_->topology);
    if (job_->options.pmix) {
        auto pmix = PmixServer::open(
            reactor_, *job_, topology_ ? topology_->hwloc() : nullptr,
            {.fence =
                 [this](uint64_t seq, std::string data) {
                     fence(std::move(data), [this, seq](std::string all) {
                         if (pmix_)  // (released at finish)
                             pmix_->fence_done(seq, std::move(all));
                     });
                 },
             .abort = [this](uint32_t task, int status, std::string msg) { on_abort(task, status, msg); },
             .failed =
                 [this](std::string why) {
                     emit_output(job_->local.first_task, true, fmt::format("banyan-shell: {}\n", why));
                 }});
        if (pmix)
            pmix_ = std::move(*pmix);
        else  // programs that do not use PMIx still run
            log::warning("shell", "{}: {}; tasks run without PMIx", format_jobid(job_->id), pmix.error().message);
    }
    if (job_->options.pmi_simple)
        pmi_simple_ = std::make_unique<PmiSimpleServer>(
            reactor_, *job_,
            PmiSimpleServer::Handlers{
                .barrier =
                    [this](std::string data) {
                        fence(std::move(data), [this](std::string all) { pmi_simple_->barrier_done(all); });
                    },
                .abort = [this](uint32_t task, int status, std::string msg) { on_abort(task, status, msg); },
                .failed = [this](uint32_t task,
                                 std::string why) { raise("pmi", fmt::format("task {}: {}", task, why), 0); }});
    return {};
}

// Open MPI's shared-memory transport needs about 4 MiB of /dev/shm per
// local rank; a container's default (64 MiB under podman and Docker, and
// less in some pods) fails MPI codes with an obscure bus error instead.
void Shell::warn_if_shm_small() {
    constexpr uint64_t kPerRank = 4ull << 20;
    struct statvfs st;
    if (!pmix_ || statvfs(kSharedMemoryDir, &st) != 0)
        return;
    uint64_t free_bytes = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
    uint64_t needed = kPerRank * job_->local.ntasks;
    if (free_bytes >= needed)
        return;
    emit_output(job_->local.first_task, true,
                fmt::format("banyan-shell: warning: /dev/shm has {} MiB free on {}; MPI needs about {} MiB for {} "
                            "local ranks (4 MiB each): give the container a larger /dev/shm (podman --shm-size; "
                            "Kubernetes: an emptyDir of medium Memory)\n",
                            free_bytes >> 20, job_->host_of(job_->rank), needed >> 20, job_->local.ntasks));
}

// Whether this job's tasks on this host outnumber the CPUs they may run
// on (their binding, else the shell's own affinity), or may share them
// with other brokers' jobs (brokers sharing the host). With this broker
// alone on its host, this shell's tasks are the job's only ones here.
bool Shell::ranks_oversubscribe(const std::vector<TaskBinding>& bindings) const {
    const ShellJob& job = *job_;
    if (job.host_brokers > 1)
        return true;
    const uint64_t tasks_here = job.local.ntasks;
    std::set<int> cpus;
    for (const auto& b : bindings)
        cpus.insert(b.cpus.begin(), b.cpus.end());
    if (cpus.empty()) {
        cpu_set_t set;
        CPU_ZERO(&set);
        if (sched_getaffinity(0, sizeof set, &set) != 0)
            return false;
        return tasks_here > static_cast<uint64_t>(CPU_COUNT(&set));
    }
    return tasks_here > cpus.size();
}

Result<void> Shell::launch_tasks() {
    const ShellJob& job = *job_;
    warn_if_shm_small();
    const RankChildren& mine = job.R.ranks.at(job.rank);
    // Where brokers share a host, another broker may hand out the same
    // cores: binding would stack tasks of two jobs on one core.
    Affinity cpu_affinity = job.options.cpu_affinity;
    if (job.host_brokers > 1 && !job.options.cpu_affinity_given)
        cpu_affinity = Affinity::off;
    auto bindings = task_bindings(
        cpu_affinity == Affinity::off || !topology_ ? std::vector<std::vector<int>>() : topology_->core_cpus(),
        mine.cores, mine.gpus, job.local.ntasks, cpu_affinity, job.options.gpu_affinity);
    bool yield = ranks_oversubscribe(bindings);
    std::string command = resolve_command(job.command[0], env_value(job.environment, "PATH"));
    for (uint32_t i = 0; i < job.local.ntasks; i++) {
        uint32_t rank = job.local.first_task + i;
        Task::Setup setup;
        setup.rank = rank;
        setup.label = job.options.label;
        setup.spawn.argv = job.command;  // argv[0] as the user gave it
        setup.spawn.program = command;
        setup.spawn.cwd = job.cwd;
        if (containers_) {
            auto inside = containers_->for_task(i);
            setup.spawn.program = inside.program;
            setup.spawn.user_ns_fd = inside.user_ns;
            setup.spawn.mount_ns_fd = inside.mount_ns;
        }
        setup.spawn.cpus = bindings[i].cpus;
        // As mpirun does when it oversubscribes: an MPI rank that polls
        // while it waits would take the CPU from the rank it waits for.
        // Before the job's environment, so a value the job set wins
        // (last_of_each_name).
        std::vector<std::string> env;
        if (yield)
            env.push_back("OMPI_MCA_mpi_yield_when_idle=1");
        env.insert(env.end(), job.environment.begin(), job.environment.end());
        env.push_back("BANYAN_JOB_ID=" + format_jobid(job.id));
        env.push_back(fmt::format("BANYAN_TASK_RANK={}", rank));
        env.push_back(fmt::format("BANYAN_TASK_LOCAL_ID={}", i));
        env.push_back(fmt::format("BANYAN_JOB_SIZE={}", job.map.ntasks));
        env.push_back(fmt::format("BANYAN_JOB_NNODES={}", job.nnodes));
        env.push_back("BANYAN_URI=" + job.uri);
        env.push_back("BANYAN_JOB_TMPDIR=" + job.tmpdir);
        if (job.options.slurm) {
            auto slurm = job.slurm_environment(rank, i, mine.cores.count());
            env.insert(env.end(), slurm.begin(), slurm.end());
        }
        if (!bindings[i].gpus.empty())
            env.push_back("CUDA_VISIBLE_DEVICES=" + bindings[i].gpus);
        if (pmix_) {
            auto pmix_env = pmix_->task_environment(rank);
            env.insert(env.end(), pmix_env.begin(), pmix_env.end());
        }
        UniqueFd pmi_fd;  // the task's end, closed here once it runs
        if (pmi_simple_) {
            auto fd = pmi_simple_->connect_task(rank);
            if (!fd)
                return fd.error();
            pmi_fd = std::move(*fd);
            setup.spawn.fd3 = pmi_fd.get();
            auto pmi_env = pmi_simple_->task_environment(rank);
            env.insert(env.end(), pmi_env.begin(), pmi_env.end());
        }
        setup.spawn.env = last_of_each_name(std::move(env));
        // Opened now, so a file that cannot be opened fails the launch.
        // Labels are added by the shell: labelled output goes through it
        // (emit_output), which writes to the file opened here.
        auto out = output_file(false, rank);
        auto err = output_file(true, rank);
        if (auto e = first_error(out, err))
            return *e;
        if (!job.options.label) {
            setup.stdout_fd = *out;
            setup.stderr_fd = *err;
        }
        if (!job.options.input_path.empty()) {
            std::string path = in_cwd(job.options.input_path);
            setup.stdin_fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
            if (setup.stdin_fd < 0)
                return make_error(errno, fmt::format("--input {}: {}", path, std::strerror(errno)));
        }
        setup.stdin_pipe = job.options.forward_stdin && rank == 0;
        setup.pty = job.options.pty && rank == 0;
        setup.pty_rows = job.options.pty_rows;
        setup.pty_cols = job.options.pty_cols;
        int input_fd = setup.stdin_fd;
        auto task = Task::start(
            reactor_, std::move(setup),
            [this](uint32_t t, bool is_stderr, std::string data) { emit_output(t, is_stderr, std::move(data)); },
            [this] { on_task_change(); });
        if (input_fd >= 0)
            close(input_fd);
        if (!task) {
            failed_status_ = task.error().code == ENOENT ? 127 : 126;
            return task.error();
        }
        tasks_.push_back(std::move(*task));
    }
    return {};
}

std::string Shell::in_cwd(const std::string& path) const {
    return path.starts_with("/") || job_->cwd.empty() ? path : job_->cwd + "/" + path;
}

Result<int> Shell::output_file(bool is_stderr, uint32_t task) {
    const auto& o = job_->options;
    const std::string& tmpl = is_stderr && !o.stderr_path.empty() ? o.stderr_path : o.stdout_path;
    if (tmpl.empty())
        return -1;
    std::string path = in_cwd(expand_output_template(tmpl, job_->id, task, job_->host_of(job_->rank)));
    if (auto it = output_files_.find(path); it != output_files_.end())
        return it->second;
    // A symbolic link is followed only when it is the job's user's own: one
    // that another user planted (in /tmp, say) must not turn the job's
    // output into an append to the user's .profile.
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0 && errno == ELOOP) {
        struct stat link {};
        if (lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode) && link.st_uid != getuid())
            return make_error(EPERM, fmt::format("output file {}: a symbolic link of uid {}, not of the job's user: "
                                                 "not followed",
                                                 path, link.st_uid));
        fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    }
    if (fd < 0)
        return make_error(errno, fmt::format("output file {}: {}", path, std::strerror(errno)));
    output_files_[path] = fd;
    return fd;
}

void Shell::emit_output(uint32_t task, bool is_stderr, std::string data) {
    if (job_->options.label) {
        auto file = output_file(is_stderr, task);
        if (file && *file >= 0) {
            if (write(*file, data.data(), data.size()) < 0)
                log::warning("shell", "{}: output file: {}", format_jobid(job_->id), std::strerror(errno));
            return;
        }
    }
    nlohmann::json m{{"type", "output"}, {"task", task}, {"stream", is_stderr ? "stderr" : "stdout"}};
    put_io_data(m, data);
    send(std::move(m));
    if (channel_ && !output_paused_ && channel_->queued_bytes() > kOutputQueueLimit) {
        output_paused_ = true;
        for (auto& t : tasks_)
            t->pause_output();
    }
}

void Shell::on_task_change() {
    if (finishing_)
        return;
    if (pmi_simple_)
        for (const auto& t : tasks_)
            if (!t->running())
                pmi_simple_->task_exited(t->rank());
    bool any_running = false;
    for (const auto& t : tasks_)
        any_running = any_running || t->running();
    if (any_running) {
        bool any_exited = std::any_of(tasks_.begin(), tasks_.end(), [](const auto& t) { return !t->running(); });
        if (any_exited && !first_exit_seen_ && job_->options.exit_timeout) {
            first_exit_seen_ = true;
            double limit = *job_->options.exit_timeout;
            exit_timer_.start(std::chrono::milliseconds(static_cast<int64_t>(limit * 1000)), [this, limit] {
                raise("exit-timeout",
                      fmt::format("a task exited and the others were still running {}s later (-o exit-timeout)", limit),
                      0);
            });
        }
        return;
    }
    // Every task has exited: end what they left behind, then wait for the
    // last output to come out of the pipes.
    exit_timer_.cancel();
    kill_everything();
    bool output_done = std::all_of(tasks_.begin(), tasks_.end(), [](const auto& t) { return t->output_done(); });
    if (output_done)
        return finish();
    if (!drain_timer_.active())
        drain_timer_.start(kDrainLimit, [this] { finish(); });
}

void Shell::finish() {
    if (finishing_)
        return;
    finishing_ = true;
    drain_timer_.cancel();
    if (proxy_)
        proxy_->close_all("the job ended");
    int status = failed_status_;
    for (const auto& t : tasks_)
        status = std::max(status, t->status());
    // The exec service ends the job at `finish` (§6), not at this
    // process's exit: nothing of the job may be left after it.
    release_job_files();
    clean_user_shm();
    nlohmann::json finish{{"type", "finish"}, {"status", status}, {"time", wall_now()}, {"usage", task_usage()}};
    send(finish);
    if (!channel_)
        return;  // kept: sent, and this shell done, once a broker re-attaches
    channel_->flush();
    if (finish_acked_) {
        unacked_finish_ = std::move(finish);  // until `done`
        return;
    }
    exit_code_ = 0;
    reactor_.stop();
}

void Shell::on_abort(uint32_t task, int status, const std::string& message) {
    raise("abort",
          fmt::format("task {} called MPI_Abort (status {}){}{}", task, status, message.empty() ? "" : ": ", message),
          0);
}

void Shell::fence(std::string data, std::function<void(std::string all)> done) {
    uint64_t seq = next_fence_++;
    auto nshells =
        std::count_if(job_->map.blocks.begin(), job_->map.blocks.end(), [](const auto& b) { return b.ntasks > 0; });
    if (nshells == 1)
        return done(std::move(data));
    fences_[seq] = std::move(done);
    send({{"type", "fence"}, {"seq", seq}, {"nshells", nshells}, {"data", base64_encode(data)}});
}

void Shell::on_fence_result(const nlohmann::json& m) {
    if (!m.contains("seq") || !m["seq"].is_number_unsigned() || !m.contains("data") || !m["data"].is_object())
        return log::error("shell", "a fence result without seq or data");
    std::map<uint32_t, std::string> parts;  // in rank order
    for (const auto& [rank, data] : m["data"].items()) {
        auto bytes = data.is_string() ? base64_decode(data.get<std::string>())
                                      : Result<std::string>(make_error(EINVAL, "not a string"));
        if (!bytes)
            return raise("exec", fmt::format("fence data of rank {}: {}", rank, bytes.error().message), 0);
        parts[static_cast<uint32_t>(std::strtoul(rank.c_str(), nullptr, 10))] = std::move(*bytes);
    }
    std::string all;
    for (auto& [rank, bytes] : parts)
        all += bytes;
    auto it = fences_.find(m["seq"].get<uint64_t>());
    if (it == fences_.end())
        return log::error("shell", "the result of fence {}, which this shell did not start", m["seq"].dump());
    auto done = std::move(it->second);
    fences_.erase(it);
    done(std::move(all));
}

// A request for the nested instance this job runs (exec.proxy,
// doc/spec/shell.md §3): passed on as the job's user, answered in turn.
void Shell::on_proxy_request(const nlohmann::json& m) {
    auto tag = json_field<uint64_t>(m, "tag", 0, "proxy");
    auto uri = json_field<std::string>(m, "uri", "", "proxy");
    if (auto e = first_error(tag, uri))
        return log::error("shell", "{}: {}", format_jobid(job_->id), e->message);
    if (!proxy_)
        proxy_ = std::make_unique<InstanceProxy>(reactor_, [this](uint64_t t, nlohmann::json answer) {
            answer["type"] = "proxy";
            answer["tag"] = t;
            send(std::move(answer));
        });
    proxy_->forward(*tag, *uri, json_object_at(m, {"request"}));
}

void Shell::raise(const std::string& type, const std::string& note, int severity) {
    send({{"type", "exception"}, {"exception", type}, {"severity", severity}, {"note", note}});
}

void Shell::signal_tasks(int signo) {
    // What an exited task left in its group is signalled too, but only
    // while one of this shell's children (its orphans come here) is in it:
    // an empty group's number may belong to an unrelated process by now.
    std::set<pid_t> live_groups;
    for (pid_t pid : children_of_self())
        live_groups.insert(getpgid(pid));
    for (auto& t : tasks_) {
        if (t->running())
            t->signal(signo);
        else if (t->pgid() > 0 && live_groups.count(t->pgid()))
            kill(-t->pgid(), signo);
    }
}

void Shell::kill_everything() {
    signal_tasks(SIGKILL);
    if (containers_)
        containers_->end_holders();
    // Orphans re-parented to this subreaper: kill and reap until none is
    // left. (Tasks themselves are reaped already, except when the broker is
    // gone and the shell exits without their statuses.)
    for (int round = 0; round < 100; round++) {
        std::set<pid_t> left = children_of_self();
        if (left.empty())
            return;
        for (pid_t pid : left)
            kill(pid, SIGKILL);
        for (pid_t pid : left)
            waitpid(pid, nullptr, 0);
    }
}

}  // namespace banyan
