#include "core/reactor.hpp"

#include <csignal>
#include <cstring>
#include <utility>

#include <fcntl.h>
#include <sched.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

extern char** environ;

namespace banyan {

Reactor::Reactor() = default;

void Reactor::run() {
    io_.restart();
    // Keep run() alive while nothing is pending (e.g. between an RPC send and
    // its reply) until stop() is called explicitly.
    auto guard = boost::asio::make_work_guard(io_);
    io_.run();
}

void Reactor::run_for(Duration limit) {
    io_.restart();
    auto guard = boost::asio::make_work_guard(io_);
    io_.run_for(limit);
}

void Reactor::stop() {
    io_.stop();
}

void Reactor::post(std::function<void()> fn) {
    boost::asio::post(io_, std::move(fn));
}

// --- Timer ---------------------------------------------------------------

struct Timer::State {
    explicit State(boost::asio::io_context& io) : timer(io) {}
    boost::asio::steady_timer timer;
    std::function<void()> fn;
    Duration period{};
    bool repeating = false;
    bool armed = false;
    uint64_t generation = 0;  // a handler from an older arming must not fire
};

Timer::Timer(Reactor& reactor) : state_(std::make_shared<State>(reactor.io())) {}

Timer::~Timer() {
    cancel();
}

void Timer::arm(const std::shared_ptr<State>& state, Duration after) {
    state->armed = true;
    uint64_t gen = state->generation;
    std::weak_ptr<State> weak = state;
    auto fire = [weak, gen](const boost::system::error_code& ec) {
        auto s = weak.lock();
        if (ec || !s || s->generation != gen)
            return;
        s->armed = false;
        if (s->repeating)
            arm(s, s->period);
        auto fn = s->fn;  // the callback may restart or destroy the timer
        fn();
    };
    if (after <= Duration::zero() && !state->repeating) {
        // "As soon as the loop turns": queued, with no kernel timer to set
        // (timerfd_settime was a tenth of rank 0's time at 2,000 jobs/s).
        boost::asio::post(state->timer.get_executor(), [fire] { fire({}); });
        return;
    }
    state->timer.expires_after(after);
    state->timer.async_wait(fire);
}

void Timer::start(Duration after, std::function<void()> fn) {
    cancel();
    state_->fn = std::move(fn);
    state_->repeating = false;
    arm(state_, after);
}

void Timer::start_repeating(Duration period, std::function<void()> fn) {
    cancel();
    state_->fn = std::move(fn);
    state_->repeating = true;
    state_->period = period;
    arm(state_, period);
}

void Timer::cancel() {
    state_->generation++;
    if (std::exchange(state_->armed, false))
        state_->timer.cancel();
}

bool Timer::active() const {
    return state_->armed;
}

// --- FdWatcher -------------------------------------------------------------

struct FdWatcher::State {
    State(boost::asio::io_context& io, int fd) : descriptor(io, fd) {}
    boost::asio::posix::stream_descriptor descriptor;
    boost::asio::posix::stream_descriptor::wait_type wait;
    std::function<void()> fn;
    bool stopped = false;
};

void FdWatcher::arm(const std::shared_ptr<State>& state) {
    std::weak_ptr<State> weak = state;
    state->descriptor.async_wait(state->wait, [weak](const boost::system::error_code& ec) {
        auto s = weak.lock();
        if (ec || !s || s->stopped)
            return;
        arm(s);
        auto fn = s->fn;  // the callback may destroy the watcher
        fn();
    });
}

FdWatcher::FdWatcher(Reactor& reactor, int fd, Event event, std::function<void()> fn)
    : state_(std::make_shared<State>(reactor.io(), fd)) {
    state_->wait = event == Event::readable ? boost::asio::posix::stream_descriptor::wait_read
                                            : boost::asio::posix::stream_descriptor::wait_write;
    state_->fn = std::move(fn);
    arm(state_);
}

FdWatcher::~FdWatcher() {
    stop();
}

void FdWatcher::stop() {
    if (state_->stopped)
        return;
    state_->stopped = true;
    boost::system::error_code ignored;
    state_->descriptor.cancel(ignored);
    state_->descriptor.release();  // the caller owns the fd
}

// --- SignalWatcher ---------------------------------------------------------

struct SignalWatcher::State {
    explicit State(boost::asio::io_context& io) : set(io) {}
    boost::asio::signal_set set;
    std::function<void(int)> fn;
};

void SignalWatcher::arm(const std::shared_ptr<State>& state) {
    std::weak_ptr<State> weak = state;
    state->set.async_wait([weak](const boost::system::error_code& ec, int signo) {
        auto s = weak.lock();
        if (ec || !s)
            return;
        arm(s);
        auto fn = s->fn;
        fn(signo);
    });
}

SignalWatcher::SignalWatcher(Reactor& reactor, std::vector<int> signals, std::function<void(int)> fn)
    : state_(std::make_shared<State>(reactor.io())) {
    for (int signo : signals)
        state_->set.add(signo);
    state_->fn = std::move(fn);
    arm(state_);
}

SignalWatcher::~SignalWatcher() {
    boost::system::error_code ignored;
    state_->set.cancel(ignored);
    state_->set.clear(ignored);
}

// --- Subprocess ------------------------------------------------------------

namespace {

// posix_spawn attributes and file actions, released on every path.
struct SpawnResources {
    posix_spawnattr_t attr;
    posix_spawn_file_actions_t actions;
    SpawnResources() {
        posix_spawnattr_init(&attr);
        posix_spawn_file_actions_init(&actions);
    }
    ~SpawnResources() {
        posix_spawnattr_destroy(&attr);
        posix_spawn_file_actions_destroy(&actions);
    }
};

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
    std::vector<char*> out;
    out.reserve(strings.size() + 1);
    for (const auto& s : strings)
        out.push_back(const_cast<char*>(s.c_str()));
    out.push_back(nullptr);
    return out;
}

}  // namespace

Result<std::unique_ptr<Subprocess>> Subprocess::spawn(Reactor& reactor, const SpawnOptions& options,
                                                      std::function<void(int)> on_exit) {
    if (options.argv.empty() || options.argv[0].empty())
        return make_error(EINVAL, "spawn: empty command");
    SpawnResources r;
    // The child starts with default dispositions and an empty mask whatever
    // this process ignores or blocks (SIGPIPE, for one).
    sigset_t all;
    sigset_t none;
    sigfillset(&all);
    sigemptyset(&none);
    short flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK;
    posix_spawnattr_setsigdefault(&r.attr, &all);
    posix_spawnattr_setsigmask(&r.attr, &none);
    if (options.new_process_group) {
        flags |= POSIX_SPAWN_SETPGROUP;
        posix_spawnattr_setpgroup(&r.attr, 0);
    }
    posix_spawnattr_setflags(&r.attr, flags);
    if (options.stdin_fd >= 0)
        posix_spawn_file_actions_adddup2(&r.actions, options.stdin_fd, 0);
    if (options.stdout_fd >= 0)
        posix_spawn_file_actions_adddup2(&r.actions, options.stdout_fd, 1);
    if (options.stderr_fd >= 0)
        posix_spawn_file_actions_adddup2(&r.actions, options.stderr_fd, 2);
    if (!options.cwd.empty())
        posix_spawn_file_actions_addchdir_np(&r.actions, options.cwd.c_str());

    auto argv = c_strings(options.argv);
    std::vector<char*> envp;
    if (options.env)
        envp = c_strings(*options.env);
    pid_t pid = -1;
    // posix_spawn has no affinity attribute; the child inherits the calling
    // thread's mask, so the mask is set on this thread for the spawn only.
    cpu_set_t saved;
    bool bind = !options.cpus.empty() && sched_getaffinity(0, sizeof saved, &saved) == 0;
    if (bind) {
        cpu_set_t wanted;
        CPU_ZERO(&wanted);
        for (int cpu : options.cpus)
            if (cpu >= 0 && cpu < CPU_SETSIZE)
                CPU_SET(cpu, &wanted);
        if (sched_setaffinity(0, sizeof wanted, &wanted) != 0)
            return make_error(errno, fmt::format("{}: cannot bind to the CPUs given: {}", options.argv[0],
                                                 std::strerror(errno)));
    }
    const char* program = options.program.empty() ? argv[0] : options.program.c_str();
    int rc = posix_spawnp(&pid, program, &r.actions, &r.attr, argv.data(), options.env ? envp.data() : environ);
    if (bind)
        sched_setaffinity(0, sizeof saved, &saved);
    if (rc != 0)
        return make_error(rc, fmt::format("{}: {}", options.argv[0], std::strerror(rc)));

    std::unique_ptr<Subprocess> proc(new Subprocess());
    proc->pid_ = pid;
    proc->own_group_ = options.new_process_group;
    proc->on_exit_ = std::move(on_exit);
    proc->pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    if (proc->pidfd_ < 0) {
        int err = errno;
        return make_error(err, fmt::format("pidfd_open: {}", std::strerror(err)));  // ~Subprocess reaps it
    }
    fcntl(proc->pidfd_, F_SETFD, FD_CLOEXEC);
    Subprocess* self = proc.get();
    proc->watcher_ = std::make_unique<FdWatcher>(reactor, proc->pidfd_, FdWatcher::Event::readable,
                                                 [self] { self->on_pidfd_readable(); });
    return proc;
}

void Subprocess::on_pidfd_readable() {
    int status = 0;
    pid_t rc = waitpid(pid_, &status, WNOHANG);
    if (rc != pid_)
        return;
    running_ = false;
    watcher_.reset();
    close(pidfd_);
    pidfd_ = -1;
    auto fn = std::move(on_exit_);  // may destroy this
    if (fn)
        fn(status);
}

Result<void> Subprocess::signal(int signo) {
    if (!running_)
        return make_error(ESRCH, fmt::format("process {} has exited", pid_));
    int rc = own_group_ ? kill(-pid_, signo) : kill(pid_, signo);
    if (rc < 0)
        return make_error(errno, fmt::format("kill {}: {}", pid_, std::strerror(errno)));
    return {};
}

Subprocess::~Subprocess() {
    watcher_.reset();
    if (running_ && pid_ > 0) {
        if (own_group_)
            kill(-pid_, SIGKILL);
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
    }
    if (pidfd_ >= 0)
        close(pidfd_);
}

int exit_code_from_wait_status(int wait_status) {
    if (WIFEXITED(wait_status))
        return WEXITSTATUS(wait_status);
    if (WIFSIGNALED(wait_status))
        return 128 + WTERMSIG(wait_status);
    return 1;
}

}  // namespace banyan
