// The exec service: the node's prolog and epilog around a job
// (banyan.toml(5) exec.prolog, exec.epilog), and draining this rank when
// one fails.
#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <set>
#include <utility>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "broker/exec/local_job.hpp"
#include "core/duration.hpp"
#include "core/idset.hpp"
#include "core/json_field.hpp"
#include "core/json_parse.hpp"
#include "core/log.hpp"

namespace banyan {

// exec.prolog / exec.epilog: `/bin/sh -c COMMAND` as this broker's user
// (for root, the command is `banyan-imp run prolog`), with the job's
// variables, killed at exec.prolog-timeout. `done` gets why it failed, or
// nothing.
void ExecService::run_perilog(JobId id, LocalJob& job, const char* which,
                              std::function<void(std::optional<std::string>)> done) {
    std::vector<std::string> env;
    for (char** e = environ; *e; e++)
        env.emplace_back(*e);
    env.insert(env.end(), job.perilog_env.begin(), job.perilog_env.end());
    const std::string& command = std::string_view(which) == "prolog" ? *prolog_ : *epilog_;
    // Posted: the Subprocess is destroyed here, not inside its own callback.
    auto on_exit = [this, id, which, done](int wait_status) {
        broker_.reactor().post([this, id, which, wait_status, done] {
            auto it = jobs_.find(id);
            if (it != jobs_.end()) {
                it->second->perilog.reset();
                it->second->perilog_timer.reset();
            }
            if (WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0)
                return done(std::nullopt);
            bool timed_out = it != jobs_.end() && it->second->perilog_timed_out;
            done(timed_out ? fmt::format("{} on rank {} did not end within {}s (exec.prolog-timeout)", which,
                                         broker_.bootstrap().rank, perilog_timeout_)
                           : fmt::format("{} on rank {} {}", which, broker_.bootstrap().rank,
                                         WIFEXITED(wait_status)
                                             ? fmt::format("exited with status {}", WEXITSTATUS(wait_status))
                                             : describe_wait_status(wait_status)));
        });
    };
    auto proc = Subprocess::spawn(broker_.reactor(), {.argv = {"/bin/sh", "-c", command}, .env = env}, on_exit);
    if (!proc)
        return done(fmt::format("{} on rank {}: {}", which, broker_.bootstrap().rank, proc.error().message));
    job.perilog = std::move(*proc);
    job.perilog_timed_out = false;
    job.perilog_timer = std::make_unique<Timer>(broker_.reactor());
    job.perilog_timer->start(std::chrono::milliseconds(static_cast<int64_t>(perilog_timeout_ * 1000)), [this, id] {
        auto it = jobs_.find(id);
        if (it == jobs_.end() || !it->second->perilog)
            return;
        it->second->perilog_timed_out = true;
        (void)it->second->perilog->signal(SIGKILL);
    });
}

void ExecService::drain_self(const std::string& reason) {
    uint32_t rank = broker_.bootstrap().rank;
    log::error("exec", "draining rank {}: {}", rank, reason);
    broker_.rpc(Message::request("resource.drain", {{"targets", std::to_string(rank)}, {"reason", reason}}, 0),
                [rank](const Message& resp) {
                    if (resp.errnum)
                        log::error("exec", "rank {} not drained: {}", rank, resp.error_text());
                });
}

// The job's end is reported once the epilog (if any) has run: until then
// its resources stay allocated, so no next job starts on a node being
// cleaned. A failing epilog drains the node.
void ExecService::after_epilog(JobId id, std::function<void()> then) {
    auto it = jobs_.find(id);
    if (!epilog_ || it == jobs_.end() || it->second->perilog_env.empty())
        return then();
    run_perilog(id, *it->second, "epilog", [this, then](std::optional<std::string> failed) {
        if (failed)
            drain_self(*failed);
        then();
    });
}

}  // namespace banyan
