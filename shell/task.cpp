#include "shell/task.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <utility>

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/text.hpp"

namespace banyan {

std::string env_value(const std::vector<std::string>& env, std::string_view name) {
    std::string value;
    for (const auto& e : env)
        if (e.size() > name.size() && e.compare(0, name.size(), name) == 0 && e[name.size()] == '=')
            value = e.substr(name.size() + 1);
    return value;
}

std::string resolve_command(const std::string& command, std::string_view path) {
    if (command.find('/') != std::string::npos || path.empty())
        return command;
    for (const auto& dir : split(path, ':')) {
        std::string candidate = (dir.empty() ? "." : dir) + "/" + command;
        struct stat st {};
        if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(candidate.c_str(), X_OK) == 0)
            return candidate;
    }
    return command;
}
namespace {

// A cut line and its label fit one output message (job-manager.output
// takes at most 1 MiB of data at once) with a read's 64 KiB beside it.
constexpr size_t kMaxLabelledLine = size_t{512} << 10;

// Closes the fds it holds when it goes out of scope.
struct FdCloser {
    std::vector<int> fds;
    ~FdCloser() {
        for (int fd : fds)
            if (fd >= 0)
                close(fd);
    }
};

Result<std::pair<int, int>> make_pipe() {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0)
        return make_error(errno, fmt::format("pipe: {}", std::strerror(errno)));
    return std::pair<int, int>(fds[0], fds[1]);
}

// A pseudo-terminal: its master side (the shell's) and its other side
// (the task's), both close-on-exec (the child places its copies).
Result<std::pair<UniqueFd, UniqueFd>> open_terminal(uint16_t rows, uint16_t cols) {
    UniqueFd master(posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
    if (!master || grantpt(master.get()) != 0 || unlockpt(master.get()) != 0)
        return make_error(errno, fmt::format("--pty: a pseudo-terminal: {}", std::strerror(errno)));
    char name[64];
    if (ptsname_r(master.get(), name, sizeof name) != 0)
        return make_error(errno, fmt::format("--pty: ptsname: {}", std::strerror(errno)));
    UniqueFd other(open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
    if (!other)
        return make_error(errno, fmt::format("--pty: {}: {}", name, std::strerror(errno)));
    winsize size{.ws_row = rows, .ws_col = cols, .ws_xpixel = 0, .ws_ypixel = 0};
    (void)ioctl(master.get(), TIOCSWINSZ, &size);
    return std::pair<UniqueFd, UniqueFd>(std::move(master), std::move(other));
}

}  // namespace

Result<std::unique_ptr<Task>> Task::start(Reactor& reactor, Setup setup, Sink sink, std::function<void()> on_change) {
    std::unique_ptr<Task> task(new Task());
    task->reactor_ = &reactor;
    task->rank_ = setup.rank;
    task->label_ = setup.label;
    task->sink_ = std::move(sink);
    task->on_change_ = std::move(on_change);
    FdCloser child_ends;  // the child's copies, closed here once it has them
    int in = setup.stdin_fd;
    if (setup.pty) {
        auto terminal = open_terminal(setup.pty_rows, setup.pty_cols);
        if (!terminal)
            return terminal.error();
        auto& [master, other] = *terminal;
        int writer = fcntl(master.get(), F_DUPFD_CLOEXEC, 3);
        int reader = fcntl(master.get(), F_DUPFD_CLOEXEC, 3);
        if (writer < 0 || reader < 0) {
            int err = errno;
            for (int fd : {writer, reader})
                if (fd >= 0)
                    close(fd);
            return make_error(err, fmt::format("--pty: {}", std::strerror(err)));
        }
        in = setup.stdout_fd = setup.stderr_fd = other.get();
        child_ends.fds.push_back(other.release());
        task->stdin_ = std::make_unique<PipeWriter>(reactor, writer);
        task->out_.fd = reader;  // end of file: the terminal's last user is gone (EIO)
        fcntl(reader, F_SETFL, O_NONBLOCK);
        task->terminal_ = std::move(master);
        setup.spawn.controlling_terminal = true;
    } else if (setup.stdin_pipe) {
        auto p = make_pipe();
        if (!p)
            return p.error();
        in = p->first;
        child_ends.fds.push_back(p->first);
        task->stdin_ = std::make_unique<PipeWriter>(reactor, p->second);
    } else if (in < 0) {
        in = open("/dev/null", O_RDONLY | O_CLOEXEC);
        child_ends.fds.push_back(in);
    }
    int out_fds[2] = {setup.stdout_fd, setup.stderr_fd};
    for (int i = 0; i < 2; i++) {
        if (out_fds[i] >= 0)
            continue;
        auto p = make_pipe();
        if (!p)
            return p.error();
        Stream& s = i == 0 ? task->out_ : task->err_;
        s.fd = p->first;
        s.is_stderr = i == 1;
        fcntl(s.fd, F_SETFL, O_NONBLOCK);
        out_fds[i] = p->second;
        child_ends.fds.push_back(p->second);
    }
    setup.spawn.stdin_fd = in;
    setup.spawn.stdout_fd = out_fds[0];
    setup.spawn.stderr_fd = out_fds[1];
    // Its own session, not only its own group: a task never shares the
    // terminal the instance was started from (an interactive program would
    // be stopped reading it from a background group).
    setup.spawn.new_session = true;
    Task* raw = task.get();
    auto proc = Subprocess::spawn(reactor, setup.spawn, [raw](int wait_status) {
        raw->status_ = exit_code_from_wait_status(wait_status);
        // What it wrote before it exited is in the pipes: take it now, so
        // it is ahead of anything the shell says about the exit.
        raw->read(raw->out_, true);
        raw->read(raw->err_, true);
        raw->on_change_();
    });
    if (!proc)
        return proc.error();
    task->proc_ = std::move(*proc);
    task->pgid_ = task->proc_->pid();
    task->resume_output();
    return task;
}

void Task::watch(Stream& s) {
    if (!s.open() || s.watch)
        return;
    s.watch = std::make_unique<FdWatcher>(*reactor_, s.fd, FdWatcher::Event::readable, [this, &s] {
        read(s);
        if (!s.open())
            on_change_();
    });
}

void Task::pause_output() {
    paused_ = true;
    out_.watch.reset();
    err_.watch.reset();
}

void Task::resume_output() {
    paused_ = false;
    watch(out_);
    watch(err_);
}

Task::~Task() {
    for (Stream* s : {&out_, &err_}) {
        s->watch.reset();
        if (s->fd >= 0)
            close(s->fd);
    }
}

void Task::signal(int signo) {
    if (!running())
        return;
    // On a terminal (--pty) a shell runs its commands in process groups of
    // their own: the one in the foreground gets it, as from a keyboard (the
    // shell, at its prompt, is that one). SIGKILL goes to the task's own
    // group besides: it ends the job.
    pid_t foreground = terminal_ ? tcgetpgrp(terminal_.get()) : -1;
    if (foreground > 0)
        (void)kill(-foreground, signo);
    if (foreground <= 0 || (signo == SIGKILL && foreground != pgid_))
        (void)proc_->signal(signo);
}

void Task::write_stdin(std::string data, bool eof) {
    if (!stdin_)
        return;
    stdin_->write(std::move(data));
    if (eof && terminal_)
        stdin_->write(std::string(1, '\x04'));  // (VEOF, as a terminal's user types it)
    else if (eof)
        stdin_->close();
}

void Task::set_window_size(uint16_t rows, uint16_t cols) {
    winsize size{.ws_row = rows, .ws_col = cols, .ws_xpixel = 0, .ws_ypixel = 0};
    if (terminal_)
        (void)ioctl(terminal_.get(), TIOCSWINSZ, &size);  // (the kernel sends SIGWINCH)
}

void Task::read(Stream& s, bool at_exit) {
    char buf[65536];
    // A writer as fast as this loop would keep it here for ever: once the
    // output is paused (the exec service is behind), the rest waits in
    // the pipe, and the task in write().
    while (s.open() && (at_exit || !paused_)) {
        ssize_t n = ::read(s.fd, buf, sizeof buf);
        if (n > 0) {
            emit(s, std::string(buf, static_cast<size_t>(n)), false);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        s.watch.reset();  // end of file, or an error that ends it
        close(s.fd);
        s.fd = -1;
        emit(s, "", true);
    }
}

void Task::emit(Stream& s, std::string data, bool at_eof) {
    if (!label_) {
        // A character cut by the pipe's chunking waits for its other bytes
        // (alone, each chunk would end in U+FFFD when written as JSON).
        std::string text = s.partial.empty() ? std::move(data) : s.partial + data;
        size_t complete = at_eof ? text.size() : utf8_complete_length(text);
        s.partial = text.substr(complete);
        text.resize(complete);
        if (!text.empty())
            sink_(rank_, s.is_stderr, std::move(text));
        return;
    }
    s.partial += data;
    std::string lines;
    size_t start = 0;
    for (size_t nl; (nl = s.partial.find('\n', start)) != std::string::npos; start = nl + 1)
        lines += fmt::format("{}: {}", rank_, std::string_view(s.partial).substr(start, nl + 1 - start));
    s.partial.erase(0, start);
    // A line is labelled whole, so it waits here until its newline: past
    // kMaxLabelledLine it goes out cut (with a newline), the job told once;
    // the rest of it follows as lines of its own.
    if (s.partial.size() > kMaxLabelledLine) {
        size_t at = 0;
        for (; s.partial.size() - at > kMaxLabelledLine; at += kMaxLabelledLine)
            lines += fmt::format("{}: {}\n", rank_, std::string_view(s.partial).substr(at, kMaxLabelledLine));
        s.partial.erase(0, at);
        if (!std::exchange(s.cut, true))
            lines += fmt::format("{}: banyan-shell: a line over {} bytes was cut\n", rank_, kMaxLabelledLine);
    }
    if (at_eof && !s.partial.empty()) {
        lines += fmt::format("{}: {}\n", rank_, s.partial);
        s.partial.clear();
    }
    if (!lines.empty())
        sink_(rank_, s.is_stderr, std::move(lines));
}

}  // namespace banyan
