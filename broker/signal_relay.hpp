// SIGUSR1 and SIGUSR2 at a broker (doc/spec/instances.md §4): never fatal;
// a nested instance's rank 0 passes them on to its initial program, its
// running jobs, or both, as --signal-to says.
#pragma once

#include <memory>
#include <string>

#include "broker/broker.hpp"
#include "broker/initial_program.hpp"

namespace banyan {

class SignalRelay {
  public:
    enum class To { nowhere, script, jobs, all };
    // "script", "jobs" or "all"; error names the text.
    static Result<To> parse(const std::string& text);

    // `to`: nowhere for every broker but a nested rank 0.
    SignalRelay(Broker& broker, InitialProgram& program, To to);

  private:
    void relay(int signo);

    Broker& broker_;
    InitialProgram& program_;
    To to_;
    std::unique_ptr<SignalWatcher> watcher_;
};

}  // namespace banyan
