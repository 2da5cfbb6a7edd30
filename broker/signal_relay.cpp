#include "broker/signal_relay.hpp"

#include <csignal>

#include <fmt/format.h>

#include "core/json_field.hpp"
#include "core/log.hpp"

namespace banyan {

Result<SignalRelay::To> SignalRelay::parse(const std::string& text) {
    if (text == "script")
        return To::script;
    if (text == "jobs")
        return To::jobs;
    if (text == "all")
        return To::all;
    return make_error(EINVAL, fmt::format("--signal-to={}: expected script, jobs or all", text));
}

SignalRelay::SignalRelay(Broker& broker, InitialProgram& program, To to)
    : broker_(broker), program_(program), to_(to) {
    watcher_ = std::make_unique<SignalWatcher>(broker.reactor(), std::vector<int>{SIGUSR1, SIGUSR2},
                                               [this](int signo) { relay(signo); });
}

void SignalRelay::relay(int signo) {
    if (to_ == To::nowhere) {
        log::info("broker", "signal {}: ignored (only a nested instance's rank 0 passes it on)", signo);
        return;
    }
    if (to_ == To::script || to_ == To::all)
        if (!program_.signal(signo))
            log::info("broker", "signal {}: no initial program runs to pass it on to", signo);
    if (to_ == To::jobs || to_ == To::all)
        broker_.rpc(Message::request("job-manager.kill-all", {{"signal", signo}}, 0), [signo](const Message& resp) {
            if (resp.errnum != 0)
                log::warning("broker", "signal {}: not passed on to the jobs: {}", signo, resp.error_text());
            else if (auto body = resp.json())
                log::info("broker", "signal {}: passed on to {} running jobs", signo,
                          json_field<int64_t>(*body, "count", 0, "kill-all").value_or(0));
        });
}

}  // namespace banyan
