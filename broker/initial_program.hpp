// Batch mode (`banyan start --config FILE COMMAND...`, the Flux Operator's
// batch lifecycle): rank 0 runs COMMAND once the instance is running, with
// BANYAN_URI set to its local socket, then shuts the instance down; the
// broker exits with COMMAND's status, and every other broker exits 0 when
// its parent tells it to shut down. With a marker directory, rank 0 writes
// `banyan.start` there when the instance runs (before COMMAND) and
// `banyan.stop`, holding the exit status, when it ends, for sidecars that
// watch the jobs. See doc/spec/overlay.md §9.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "broker/broker.hpp"

namespace banyan {

class InitialProgram {
  public:
    // Error: the marker directory cannot be written (checked before the
    // broker joins anything).
    static Result<std::unique_ptr<InitialProgram>> start(Broker& broker, std::vector<std::string> command,
                                                         std::string marker_dir);

    // What the broker exits with: COMMAND's status (128 + signal when a
    // signal ended it, 127 when it could not start, 143 when the instance
    // shut down before it ended or began); 0 without a COMMAND.
    int exit_code() const { return exit_code_; }
    // Writes the stop marker (the broker is about to exit).
    void finish();
    // Sends `signo` to COMMAND's process alone (not its children); false
    // when it does not run.
    bool signal(int signo);

  private:
    InitialProgram(Broker& broker, std::vector<std::string> command, std::string marker_dir)
        : broker_(broker), command_(std::move(command)), marker_dir_(std::move(marker_dir)) {}
    void on_running();
    Result<void> write_marker(const std::string& name, const std::string& text) const;

    Broker& broker_;
    std::vector<std::string> command_;
    std::string marker_dir_;
    std::unique_ptr<Subprocess> process_;
    int exit_code_ = 0;
};

}  // namespace banyan
