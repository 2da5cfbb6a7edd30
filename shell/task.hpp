// Task: one local task of a job: its process (in a process group of its
// own) and the pipes its stdout and stderr come through. Output reaches the
// sink in the order it was written, per stream; with labels, a line at a
// time with "TASK: " in front.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/pipe_writer.hpp"
#include "core/reactor.hpp"
#include "core/result.hpp"
#include "core/unique_fd.hpp"

namespace banyan {

// The value of variable NAME in `env` ("K=V" entries), the last one as the
// task sees it (the shell keeps the last of each name); "" when unset.
std::string env_value(const std::vector<std::string>& env, std::string_view name);

// COMMAND as the task's PATH (`path`) finds it, from the current directory
// (posix_spawnp would search the shell's PATH, not the job's): the first
// executable regular file, as execvp takes; COMMAND itself when it holds a
// '/' or nothing is found (the exec then says why).
std::string resolve_command(const std::string& command, std::string_view path);

class Task {
  public:
    using Sink = std::function<void(uint32_t task, bool is_stderr, std::string data)>;
    struct Setup {
        uint32_t rank = 0;      // the task's rank in the job
        SpawnOptions spawn;     // argv, env, cwd, cpus; the std fds are set here
        int stdin_fd = -1;      // a file to read; -1: /dev/null, unless stdin_pipe
        bool stdin_pipe = false;  // input comes through write_stdin()
        int stdout_fd = -1;     // a file to write directly; -1: a pipe to the sink
        int stderr_fd = -1;
        bool label = false;
        // Its stdin, stdout and stderr are a pseudo-terminal of its own,
        // its controlling one (--pty): what it writes comes as stdout, and
        // input goes to the terminal (doc/spec/shell.md §5).
        bool pty = false;
        uint16_t pty_rows = 24, pty_cols = 80;
    };

    // `on_change` runs when the process exits and when an output pipe
    // reaches end of file. Error: the command cannot be executed.
    static Result<std::unique_ptr<Task>> start(Reactor& reactor, Setup setup, Sink sink,
                                               std::function<void()> on_change);
    ~Task();

    uint32_t rank() const { return rank_; }
    bool running() const { return proc_ && proc_->running(); }
    // The exit code, or 128+N when signal N ended it (valid once exited).
    int status() const { return status_; }
    bool output_done() const { return !out_.open() && !err_.open(); }
    // Sends `signo` to the task's process group (its children included)
    // while the task runs; Shell::signal_tasks handles what it left behind.
    void signal(int signo);
    // The task's process group (its pid), which outlives it while its
    // children are in it.
    pid_t pgid() const { return pgid_; }
    // With a terminal, end of input is its end-of-file character (^D): the
    // terminal stays.
    void write_stdin(std::string data, bool eof);
    // The terminal's size (--pty); nothing without one.
    void set_window_size(uint16_t rows, uint16_t cols);
    // Stops and resumes reading the output pipes: a task that writes faster
    // than its output can be passed on then blocks in write(). What is in
    // the pipes when the task exits is still read at once.
    void pause_output();
    void resume_output();

  private:
    struct Stream {
        int fd = -1;
        bool is_stderr = false;
        std::string partial;  // an unfinished line (labelling) or UTF-8 character
        bool cut = false;     // a labelled line was cut (told once)
        std::unique_ptr<FdWatcher> watch;
        bool open() const { return fd >= 0; }
    };
    Task() = default;
    // Reads what the pipe holds; stops once output is paused, unless
    // `at_exit` (the task has exited: what it wrote comes first).
    void read(Stream& s, bool at_exit = false);
    void emit(Stream& s, std::string data, bool at_eof);

    void watch(Stream& s);

    Reactor* reactor_ = nullptr;
    uint32_t rank_ = 0;
    bool label_ = false;
    Sink sink_;
    std::function<void()> on_change_;
    std::unique_ptr<Subprocess> proc_;
    pid_t pgid_ = -1;
    int status_ = 0;
    Stream out_, err_;
    bool paused_ = false;  // pause_output() until resume_output()
    std::unique_ptr<PipeWriter> stdin_;
    UniqueFd terminal_;  // --pty: the terminal's master side
};

}  // namespace banyan
