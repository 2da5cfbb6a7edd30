#include "broker/exec/shell_fork_server.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "core/fork_sibling.hpp"
#include "core/programs.hpp"
#include "core/unix_socket.hpp"

namespace banyan {
namespace {

// How often a server that owes an answer is looked at; and how long one
// that is at work (running, or in the kernel) may take before it is
// given up: a busy machine slows the server, and a slow answer is no
// reason to fail a job (doc/spec/shell.md §1.1).
constexpr int kAnswerCheckMs = 1000;
constexpr int kSlowServerLimitMs = 60000;

// A process's state letter (R, S, D, T, ...) and CPU time in clock ticks,
// from /proc/PID/stat; state '?' when it cannot be read (gone).
std::pair<char, uint64_t> process_activity(pid_t pid) {
    std::string stat;
    UniqueFd fd(open(fmt::format("/proc/{}/stat", pid).c_str(), O_RDONLY | O_CLOEXEC));
    char buf[1024];
    ssize_t n = fd ? read(fd.get(), buf, sizeof buf - 1) : -1;
    if (n <= 0)
        return {'?', 0};
    stat.assign(buf, static_cast<size_t>(n));
    // "PID (COMM) STATE ..." where COMM may hold anything: after the last ')'.
    auto close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size())
        return {'?', 0};
    char state = stat[close + 2];
    // Fields after STATE: ppid pgrp session tty tpgid flags minflt cminflt
    // majflt cmajflt utime stime (the 11th and 12th).
    unsigned long long utime = 0, stime = 0;
    if (std::sscanf(stat.c_str() + close + 3, "%*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2)
        return {state, 0};
    return {state, utime + stime};
}
// Requests sent and not answered: past this the server is stuck (the
// deadline ends it) and a shell is executed instead, so that a full socket
// never blocks the loop.
constexpr size_t kMaxWaiting = 64;

}  // namespace

bool ShellForkServer::supported() {
    return fork_sibling_supported();
}

Result<std::unique_ptr<ShellForkServer>> ShellForkServer::start(Reactor& reactor, const std::string& shell_path) {
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
        return make_error(errno, fmt::format("socketpair: {}", std::strerror(errno)));
    UniqueFd ours(pair[0]), theirs(pair[1]);
    // Ours never blocks the loop (a server that stops reading).
    if (fcntl(ours.get(), F_SETFL, O_NONBLOCK) != 0)
        return make_error(errno, fmt::format("the shell fork server's socket: {}", std::strerror(errno)));
    std::unique_ptr<ShellForkServer> server(new ShellForkServer(reactor));
    ShellForkServer* self = server.get();
    SpawnOptions options{
        .argv = {shell_path, "--fork-server"}, .env = environment_binding_now(), .stdin_fd = theirs.get()};
    auto proc = Subprocess::spawn(reactor, options, [self](int) { self->usable_ = false; });
    if (!proc)
        return proc.error();
    server->server_ = std::move(*proc);
    server->socket_ = std::move(ours);
    return server;
}

ShellForkServer::~ShellForkServer() {
    fail(make_error(ECONNRESET, "the broker's exec service stops"));
}

void ShellForkServer::fail(Error why) {
    usable_ = false;
    answers_.reset();
    deadline_.cancel();
    server_.reset();  // killed and waited for: it forks nothing more
    reap_unread_answers();
    socket_.reset();
    // Each waiting start hears of it on the loop, never inside a call of
    // this server's (its caller may replace the server then).
    Error error = make_error(why.code, fmt::format("the shell fork server: {}", why.message));
    for (auto& request : std::exchange(waiting_, {}))
        reactor_.post([started = std::move(request.started), error] { started(error, false); });
}

// Shells the server forked whose answers were not read (they came after
// a timeout, or behind a malformed one): this process's children, which
// no request takes now. Killed and waited for, so that none is left a
// zombie. (One forked as the server was killed, before it could answer,
// is not known here.)
void ShellForkServer::reap_unread_answers() {
    while (socket_) {
        int32_t answer = 0;
        std::vector<UniqueFd> received;
        auto n = receive_with_fds(socket_.get(), {reinterpret_cast<char*>(&answer), sizeof answer}, received);
        if (!n || *n == 0)
            return;  // none left (EAGAIN, end of file), or the socket failed
        if (*n == sizeof answer && answer > 0 && received.size() == 1)  // (a malformed one is passed over)
            Subprocess::adopt(reactor_, answer, received[0].release(), true, nullptr).reset();  // killed, reaped
    }
}

Result<void> ShellForkServer::fork_shell(int stdin_fd, int stdout_fd, int cgroup_fd, std::function<void(int)> on_exit,
                                         Started started) {
    if (!usable_)
        return make_error(EPIPE, "the shell fork server has exited");
    if (waiting_.size() >= kMaxWaiting)
        return make_error(EAGAIN, fmt::format("the shell fork server has {} requests unanswered", waiting_.size()));
    std::vector<int> fds{stdin_fd, stdout_fd};
    if (cgroup_fd >= 0)
        fds.push_back(cgroup_fd);
    if (auto sent = send_with_fds(socket_.get(), "f", fds); !sent) {
        // Never reached it: nothing was started.
        if (sent.error().code == EAGAIN)
            return make_error(EAGAIN, "the shell fork server's socket is full");
        fail(make_error(ECONNRESET, "it exited before it answered"));  // those asked before
        return make_error(EPIPE, fmt::format("the shell fork server: {}", sent.error().message));
    }
    // The answer comes on the loop (§1.1): the server's clone3 takes as
    // long as an executed shell's vfork would, and the loop goes on meanwhile.
    waiting_.push_back({std::move(on_exit), std::move(started)});
    if (!answers_)
        answers_ =
            std::make_unique<FdWatcher>(reactor_, socket_.get(), FdWatcher::Event::readable, [this] { on_answer(); });
    if (!deadline_.active())
        arm_deadline();
    return {};
}

// The oldest request waiting is answered within a second (of its asking,
// or of the answer before it), or the server is looked at then and every
// second after: one that is at work (running or runnable, in the kernel,
// or its CPU time grew) is waited for, up to kSlowServerLimitMs; one that
// is not (stopped, asleep with an answer owed, gone) is given up.
void ShellForkServer::arm_deadline() {
    owed_since_ = std::chrono::steady_clock::now();
    last_cpu_ = server_ ? process_activity(server_->pid()).second : 0;
    deadline_.start(std::chrono::milliseconds(kAnswerCheckMs), [this] { check_progress(); });
}

void ShellForkServer::check_progress() {
    // The server's state first, then the socket: an answer sent up to the
    // moment of the look counts, from a server that, having answered,
    // sleeps. (Looked at the other way round, a server that answered in
    // between, while a busy machine held this loop, read as a silent one:
    // a job failed so, under 1,024 brokers.) An answer already waiting
    // came after this loop took the timer: it is read next.
    auto [state, cpu] = server_ ? process_activity(server_->pid()) : std::pair<char, uint64_t>{'?', 0};
    pollfd pending{.fd = socket_.get(), .events = POLLIN, .revents = 0};
    if (poll(&pending, 1, 0) == 1) {
        deadline_.start(std::chrono::milliseconds(kAnswerCheckMs), [this] { check_progress(); });
        return;
    }
    auto owed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - owed_since_)
                       .count();
    bool at_work = state == 'R' || state == 'D' || cpu > last_cpu_;
    if (at_work && owed_ms < kSlowServerLimitMs) {
        last_cpu_ = cpu;
        deadline_.start(std::chrono::milliseconds(kAnswerCheckMs), [this] { check_progress(); });
        return;
    }
    if (at_work)
        return fail(make_error(ETIMEDOUT, fmt::format("no answer within {} s", kSlowServerLimitMs / 1000)));
    fail(make_error(ETIMEDOUT, fmt::format("no answer within {:.1f} s, and it is not at work (state {})",
                                           static_cast<double>(owed_ms) / 1000, state == '?' ? "gone" : std::string(1, state))));
}

// One answer a call (the watcher calls again while more wait).
void ShellForkServer::on_answer() {
    int32_t answer = 0;
    std::vector<UniqueFd> received;
    auto n = receive_with_fds(socket_.get(), {reinterpret_cast<char*>(&answer), sizeof answer}, received);
    if (!n && n.error().code == EAGAIN)
        return;  // nothing yet
    if (!n)
        return fail(make_error(EPROTO, n.error().message));
    if (*n == 0)
        return fail(make_error(ECONNRESET, "it exited before it answered"));
    if (waiting_.empty() || *n != sizeof answer || answer == 0 || (answer > 0 && received.size() != 1))
        return fail(make_error(EPROTO, "a malformed answer"));
    Request request = std::move(waiting_.front());
    waiting_.pop_front();
    if (waiting_.empty())
        deadline_.cancel();
    else
        arm_deadline();
    if (answer < 0)
        return request.started(make_error(-answer, fmt::format("banyan-shell: {}", std::strerror(-answer))), true);
    // The child makes its own group too; whichever comes first, the shell
    // is out of the server's group (which ~ShellForkServer kills) before
    // anyone signals it.
    setpgid(answer, answer);
    // Last: the callback may destroy this server.
    request.started(Subprocess::adopt(reactor_, answer, received[0].release(), true, std::move(request.on_exit)),
                    false);
}

}  // namespace banyan
