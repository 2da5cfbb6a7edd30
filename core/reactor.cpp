#include "core/reactor.hpp"

#include <csignal>
#include <cstring>
#include <utility>

#include <fcntl.h>
#include <linux/sched.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "core/descriptors.hpp"
#include "core/log.hpp"

extern char** environ;

namespace banyan {
namespace {

// Every callback the loop makes is an exception barrier: a throw is logged
// and the loop goes on. One bad handler must not end a broker and every
// job on it.
template <class Fn>
void guarded(const char* what, Fn&& fn) noexcept {
    try {
        fn();
    } catch (const std::exception& e) {
        log::error("reactor", "a {} callback failed: {}", what, e.what());
    } catch (...) {
        log::error("reactor", "a {} callback failed: an exception of unknown type", what);
    }
}

}  // namespace

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
    boost::asio::post(io_, [fn = std::move(fn)] { guarded("posted", fn); });
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
        guarded("timer", fn);
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
        guarded("fd", fn);
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
        guarded("signal", [&] { fn(signo); });
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

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
    std::vector<char*> out;
    out.reserve(strings.size() + 1);
    for (const auto& s : strings)
        out.push_back(const_cast<char*>(s.c_str()));
    out.push_back(nullptr);
    return out;
}

// What the child does between clone and exec, prepared by the parent:
// the child is a copy of a process that may have other threads, so it
// must not allocate or take a lock.
struct ChildPlan {
    const char* program;
    char** argv;
    size_t argc;
    char** envp;
    const char* cwd;  // nullptr: inherit
    bool new_process_group;
    bool new_session;
    bool controlling_terminal;
    bool keep_descriptors;
    int dup_from[4];        // -1: inherit fd 0, 1, 2; none as fd 3
    const cpu_set_t* cpus;  // nullptr: inherit
    int cgroup_fd;          // >= 0: join it here (when clone could not start us in it)
    int join_cgroup_fd;     // >= 0: a v1 cgroup to join here
    int user_ns_fd;         // >= 0: a container's namespaces to join
    int mount_ns_fd;
    int error_fd;           // a ChildFailure goes here
};

// Which step failed in the child, and its errno.
struct ChildFailure {
    enum Step : int { cgroup, process_group, redirect, container, cwd, bind, exec } step;
    int err;
};

[[noreturn]] void child_failed(const ChildPlan& plan, ChildFailure::Step step) {
    ChildFailure failure{step, errno};
    ssize_t ignored = write(plan.error_fd, &failure, sizeof failure);
    (void)ignored;
    _exit(127);
}

[[noreturn]] void run_child(const ChildPlan& plan) {
    // Default dispositions and an empty mask, whatever the parent ignores
    // or blocks (SIGPIPE, for one). SIGKILL/SIGSTOP refuse: harmless.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int signo = 1; signo < NSIG; signo++)
        sigaction(signo, &dfl, nullptr);
    for (int dir : {plan.cgroup_fd, plan.join_cgroup_fd}) {
        if (dir < 0)
            continue;
        int procs = openat(dir, "cgroup.procs", O_WRONLY | O_CLOEXEC);
        if (procs < 0 || write(procs, "0", 1) != 1)
            child_failed(plan, ChildFailure::cgroup);
        close(procs);
    }
    if ((plan.user_ns_fd >= 0 && setns(plan.user_ns_fd, CLONE_NEWUSER) != 0) ||
        (plan.mount_ns_fd >= 0 && setns(plan.mount_ns_fd, CLONE_NEWNS) != 0))
        child_failed(plan, ChildFailure::container);
    if (plan.new_session ? setsid() < 0 : plan.new_process_group && setpgid(0, 0) != 0)
        child_failed(plan, ChildFailure::process_group);
    for (int target = 0; target < 4; target++) {
        int from = plan.dup_from[target];
        if (target == 3 && from < 0)
            break;
        if (from == target ? fcntl(from, F_SETFD, 0) != 0 : from >= 0 && dup2(from, target) < 0)
            child_failed(plan, ChildFailure::redirect);
    }
    if (plan.controlling_terminal && ioctl(0, TIOCSCTTY, 0) != 0)
        child_failed(plan, ChildFailure::redirect);
    // Nothing else reaches the program: every descriptor above the ones
    // placed here closes (a listening socket or a log of this process
    // must never reach a job's task, even one opened without
    // close-on-exec). The error pipe stays until exec closes it.
    if (!plan.keep_descriptors)
        close_descriptors_from(plan.dup_from[3] >= 0 ? 4 : 3, plan.error_fd);
    if (plan.cwd && chdir(plan.cwd) != 0)
        child_failed(plan, ChildFailure::cwd);
    if (plan.cpus && sched_setaffinity(0, sizeof *plan.cpus, plan.cpus) != 0)
        child_failed(plan, ChildFailure::bind);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execvpe(plan.program, plan.argv, plan.envp);
    child_failed(plan, ChildFailure::exec);
}

std::string describe(const ChildFailure& f, const SpawnOptions& options) {
    const std::string& name = options.argv[0];
    switch (f.step) {
        case ChildFailure::cgroup:
            return fmt::format("{}: cannot start in its cgroup: {}", name, std::strerror(f.err));
        case ChildFailure::process_group:
            return fmt::format("{}: cannot start a process group: {}", name, std::strerror(f.err));
        case ChildFailure::redirect:
            return fmt::format("{}: cannot redirect its stdin/stdout/stderr: {}", name, std::strerror(f.err));
        case ChildFailure::container:
            return fmt::format("{}: cannot enter its container: {}", name, std::strerror(f.err));
        case ChildFailure::cwd:
            return fmt::format("{}: cannot change to {}: {}", name, options.cwd, std::strerror(f.err));
        case ChildFailure::bind:
            return fmt::format("{}: cannot bind to the CPUs given: {}", name, std::strerror(f.err));
        case ChildFailure::exec:
            break;
    }
    return fmt::format("{}: {}", name, std::strerror(f.err));
}

// The child's stack while it shares this process's memory (below): one per
// thread that spawns, made once, with a guard page under it (an overflow
// must fault, not write over this process's heap). A megabyte leaves room
// for execvpe, which searches PATH and runs scripts with buffers on the
// stack: a copy of argv among them, so a child with a larger argv than
// kMaxSharedArgv gets a copy of the parent instead.
constexpr size_t kChildStackSize = size_t{1} << 20;
constexpr size_t kMaxSharedArgv = 32768;

char* child_stack() {
    thread_local char* stack = [] {
        const size_t guard = static_cast<size_t>(sysconf(_SC_PAGESIZE));
        void* p = mmap(nullptr, guard + kChildStackSize, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (p == MAP_FAILED)
            return static_cast<char*>(nullptr);
        if (mprotect(p, guard, PROT_NONE) != 0) {
            munmap(p, guard + kChildStackSize);
            return static_cast<char*>(nullptr);
        }
        return static_cast<char*>(p) + guard;
    }();
    return stack;
}

[[noreturn]] void run_child_plan(void* plan) {
    run_child(*static_cast<ChildPlan*>(plan));
}

// Sanitizer runtimes keep per-thread state that a child on a foreign
// stack, in the same memory, would corrupt: they get the copy.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define BANYAN_CHILD_SHARES_MEMORY 0
#elif defined(__x86_64__)
#define BANYAN_CHILD_SHARES_MEMORY 1
#else
#define BANYAN_CHILD_SHARES_MEMORY 0
#endif

#if BANYAN_CHILD_SHARES_MEMORY
// clone3 whose child calls fn(arg) on the stack given in args and never
// returns. The C library has no clone3 wrapper, and a child on a stack of
// its own cannot return from syscall(): it would pop a return address that
// is not there. Returns the pid, or -errno.
long clone3_calling(clone_args* args, void (*fn)(void*), void* arg) {
    long ret;
    register void (*call_fn)(void*) asm("r12") = fn;
    register void* call_arg asm("r13") = arg;
    asm volatile(
        "syscall\n\t"
        "test %%rax, %%rax\n\t"
        "jnz 1f\n\t"
        "xor %%ebp, %%ebp\n\t"
        "mov %%r13, %%rdi\n\t"
        "call *%%r12\n\t"
        "ud2\n"
        "1:"
        : "=a"(ret)
        : "a"(SYS_clone3), "D"(args), "S"(sizeof *args), "r"(call_fn), "r"(call_arg)
        : "rcx", "r11", "memory");
    return ret;
}
constexpr bool kShareMemory = true;
#else
long clone3_calling(clone_args*, void (*)(void*), void*) {
    return -ENOSYS;
}
constexpr bool kShareMemory = false;
#endif

// Starts the child, in `cgroup_fd` when it is >= 0, and returns its pid and
// a pidfd. clone3 starts it straight in the cgroup: moving a process there
// afterwards (a write to cgroup.procs) costs ~10 ms, most of a small job's
// launch. The child shares this process's memory until it executes
// (CLONE_VM, as posix_spawn does): a copy of the broker's page tables, and
// the copy-on-write faults that followed in both processes, cost ~20 ms of
// CPU per job on a VM (doc/spec/shell.md §1). Where that cannot be had, a copy
// (clone3 without CLONE_VM); where clone3 is refused (old kernels,
// container seccomp filters answer ENOSYS), fork, and the child joins the
// cgroup itself.
Result<std::pair<pid_t, int>> clone_child(ChildPlan& plan) {
    clone_args args{};
    int pidfd = -1;
    args.flags = CLONE_VFORK | CLONE_PIDFD | (plan.cgroup_fd >= 0 ? CLONE_INTO_CGROUP : 0);
    args.exit_signal = SIGCHLD;
    args.pidfd = reinterpret_cast<uint64_t>(&pidfd);
    args.cgroup = plan.cgroup_fd >= 0 ? static_cast<uint64_t>(plan.cgroup_fd) : 0;
    int cgroup_fd = plan.cgroup_fd;
    plan.cgroup_fd = -1;
    // No handler of ours may run in the child before it resets them: with
    // shared memory, one would run on this process's data.
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    long pid = -1;
    char* stack = kShareMemory && plan.argc <= kMaxSharedArgv ? child_stack() : nullptr;
    if (stack) {
        clone_args shared = args;
        shared.flags |= CLONE_VM;
        shared.stack = reinterpret_cast<uint64_t>(stack);
        shared.stack_size = kChildStackSize;
        long rc = clone3_calling(&shared, run_child_plan, &plan);
        pid = rc < 0 ? -1 : rc;
        errno = rc < 0 ? static_cast<int>(-rc) : 0;
    }
    if (!stack || (pid < 0 && errno == ENOSYS)) {
        pid = syscall(SYS_clone3, &args, sizeof args);
        if (pid == 0)
            run_child(plan);
    }
    if (pid < 0 && errno == ENOSYS) {
        plan.cgroup_fd = cgroup_fd;
        pid = fork();
        if (pid == 0)
            run_child(plan);
    }
    int err = errno;
    pthread_sigmask(SIG_SETMASK, &saved, nullptr);
    if (pid < 0)
        return make_error(err, fmt::format("clone: {}", std::strerror(err)));
    if (pidfd < 0)
        pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    return std::pair{static_cast<pid_t>(pid), pidfd};
}

}  // namespace

Result<std::unique_ptr<Subprocess>> Subprocess::spawn(Reactor& reactor, const SpawnOptions& options,
                                                      std::function<void(int)> on_exit) {
    if (options.argv.empty() || options.argv[0].empty())
        return make_error(EINVAL, "spawn: empty command");
    auto argv = c_strings(options.argv);
    std::vector<char*> envp;
    if (options.env)
        envp = c_strings(*options.env);
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    for (int cpu : options.cpus)
        if (cpu >= 0 && cpu < CPU_SETSIZE)
            CPU_SET(cpu, &cpus);
    int error_pipe[2];
    if (pipe2(error_pipe, O_CLOEXEC) != 0)
        return make_error(errno, fmt::format("pipe: {}", std::strerror(errno)));
    // Above the fds the child's redirections overwrite.
    if (error_pipe[1] <= 3) {
        int moved = fcntl(error_pipe[1], F_DUPFD_CLOEXEC, 4);
        close(error_pipe[1]);
        error_pipe[1] = moved;
        if (moved < 0) {
            close(error_pipe[0]);
            return make_error(errno, fmt::format("fcntl: {}", std::strerror(errno)));
        }
    }
    ChildPlan plan{.program = options.program.empty() ? argv[0] : options.program.c_str(),
                   .argv = argv.data(),
                   .argc = options.argv.size(),
                   .envp = options.env ? envp.data() : environ,
                   .cwd = options.cwd.empty() ? nullptr : options.cwd.c_str(),
                   .new_process_group = options.new_process_group || options.new_session,
                   .new_session = options.new_session,
                   .controlling_terminal = options.new_session && options.controlling_terminal,
                   .keep_descriptors = options.keep_descriptors,
                   .dup_from = {options.stdin_fd, options.stdout_fd, options.stderr_fd, options.fd3},
                   .cpus = options.cpus.empty() ? nullptr : &cpus,
                   .cgroup_fd = options.cgroup_fd,
                   .join_cgroup_fd = options.join_cgroup_fd,
                   .user_ns_fd = options.user_ns_fd,
                   .mount_ns_fd = options.mount_ns_fd,
                   .error_fd = error_pipe[1]};
    auto child = clone_child(plan);
    close(error_pipe[1]);
    // The child has exec'd (the pipe closed) or written why it could not.
    ChildFailure failure{};
    ssize_t n = 0;
    while (child && (n = read(error_pipe[0], &failure, sizeof failure)) < 0 && errno == EINTR) {
    }
    close(error_pipe[0]);
    if (!child)
        return child.error();
    auto [pid, pidfd] = *child;
    if (n == sizeof failure) {
        waitpid(pid, nullptr, 0);
        close(pidfd);
        return make_error(failure.err, describe(failure, options));
    }

    if (pidfd < 0) {
        int err = errno;
        Subprocess reaper;  // kills and reaps it
        reaper.pid_ = pid;
        reaper.own_group_ = options.new_process_group || options.new_session;
        return make_error(err, fmt::format("pidfd_open: {}", std::strerror(err)));
    }
    fcntl(pidfd, F_SETFD, FD_CLOEXEC);
    return adopt(reactor, pid, pidfd, options.new_process_group || options.new_session, std::move(on_exit));
}

std::unique_ptr<Subprocess> Subprocess::adopt(Reactor& reactor, pid_t pid, int pidfd, bool own_group,
                                              std::function<void(int)> on_exit) {
    std::unique_ptr<Subprocess> proc(new Subprocess());
    proc->pid_ = pid;
    proc->own_group_ = own_group;
    proc->on_exit_ = std::move(on_exit);
    proc->pidfd_ = pidfd;
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
