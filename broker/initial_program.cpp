#include "broker/initial_program.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fstream>

#include <unistd.h>

#include <fmt/format.h>

#include "core/log.hpp"

namespace banyan {

Result<std::unique_ptr<InitialProgram>> InitialProgram::start(Broker& broker, std::vector<std::string> command,
                                                              std::string marker_dir) {
    bool rank0 = broker.bootstrap().rank == 0;
    if (!rank0) {
        command.clear();  // every pod gets the same command line; rank 0 runs it
        marker_dir.clear();
    }
    if (!marker_dir.empty() && access(marker_dir.c_str(), W_OK | X_OK) != 0)
        return make_error(errno, fmt::format("--marker-dir {}: {}", marker_dir, std::strerror(errno)));
    std::unique_ptr<InitialProgram> program(new InitialProgram(broker, std::move(command), std::move(marker_dir)));
    // Until COMMAND has run, the instance has not done its work: a shutdown
    // before then must not look like success to a Job controller.
    if (!program->command_.empty())
        program->exit_code_ = 128 + SIGTERM;
    if (program->command_.empty() && program->marker_dir_.empty())
        return program;
    InitialProgram* self = program.get();
    broker.when_running([self] { self->on_running(); });
    broker.when_shutting_down([self] {
        if (self->process_ && self->process_->running()) {
            log::warning("broker", "the instance shuts down before its initial program ended: terminating it");
            (void)self->process_->signal(SIGTERM);
            self->exit_code_ = 128 + SIGTERM;
        }
    });
    return program;
}

void InitialProgram::on_running() {
    if (!marker_dir_.empty())
        if (auto r = write_marker("banyan.start", fmt::format("{}\n", std::time(nullptr))); !r)
            log::warning("broker", "{}", r.error().message);
    if (command_.empty())
        return;
    std::vector<std::string> env;
    for (char** e = environ; *e; e++)
        if (std::strncmp(*e, "BANYAN_URI=", 11) != 0 && std::strncmp(*e, "NOTIFY_SOCKET=", 14) != 0)
            env.emplace_back(*e);
    env.push_back(fmt::format("BANYAN_URI=local://{}/local.sock", broker_.bootstrap().rundir));
    log::info("broker", "running the initial program: {}", fmt::join(command_, " "));
    auto process = Subprocess::spawn(broker_.reactor(), {.argv = command_, .env = std::move(env)}, [this](int status) {
        if (broker_.state() != Broker::State::shutdown)
            exit_code_ = exit_code_from_wait_status(status);
        log::info("broker", "the initial program exited with status {}", exit_code_from_wait_status(status));
        broker_.begin_shutdown("the initial program ended");
    });
    if (!process) {
        log::error("broker", "initial program: {}", process.error().message);
        exit_code_ = 127;
        broker_.begin_shutdown("the initial program could not start");
        return;
    }
    process_ = std::move(*process);
    // On a terminal whose foreground this broker is (a job's task 0 run
    // with --pty: banyan alloc --pty), the program takes the foreground, as
    // a shell gives it to the job it starts: an interactive shell would be
    // stopped reading it from a background group. SIGCONT: it may have
    // stopped itself already, waiting for it.
    if (isatty(0) && tcgetpgrp(0) == getpgrp() && tcsetpgrp(0, process_->pid()) == 0)
        kill(-process_->pid(), SIGCONT);
}

bool InitialProgram::signal(int signo) {
    // Not yet reaped while running() (its pidfd is watched): the pid is its.
    return process_ && process_->running() && kill(process_->pid(), signo) == 0;
}

void InitialProgram::finish() {
    if (marker_dir_.empty())
        return;
    if (auto r = write_marker("banyan.stop", fmt::format("{}\n", exit_code_)); !r)
        log::warning("broker", "{}", r.error().message);
}

// Small files, written once per instance, not synced: a sidecar reads them
// through the same mount.
Result<void> InitialProgram::write_marker(const std::string& name, const std::string& text) const {
    std::string path = marker_dir_ + "/" + name;
    std::ofstream out(path, std::ios::trunc);
    out << text;
    out.close();
    if (!out)
        return make_error(EIO, fmt::format("marker {}: cannot write it", path));
    return {};
}

}  // namespace banyan
