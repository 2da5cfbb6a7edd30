#include "broker/exec/profiler_link.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include "core/json_field.hpp"
#include "broker/exec/local_job.hpp"
#include "core/log.hpp"

namespace banyan {

ProfilerLink::ProfilerLink(Reactor& reactor, std::vector<std::string> argv) : reactor_(reactor) {
    int to[2], from[2];
    if (pipe2(to, O_CLOEXEC) < 0) {
        failed_ = fmt::format("pipe: {}", std::strerror(errno));
        return;
    }
    if (pipe2(from, O_CLOEXEC) < 0) {
        failed_ = fmt::format("pipe: {}", std::strerror(errno));
        close(to[0]);
        close(to[1]);
        return;
    }
    SpawnOptions options{.argv = std::move(argv), .env = std::vector<std::string>{}, .stdin_fd = to[0],
                         .stdout_fd = from[1]};
    std::string name = options.argv[0];
    auto proc = Subprocess::spawn(reactor_, options, [this, name](int status) {
        if (channel_)
            channel_->read_available();  // its last words first
        fail(fmt::format("{} {}", name, describe_wait_status(status)));
    });
    close(to[0]);
    close(from[1]);
    channel_ = std::make_unique<LineChannel>(
        reactor_, from[0], to[1], [this](Result<nlohmann::json> m) { on_line(std::move(m)); }, nullptr);
    if (!proc) {
        failed_ = proc.error().message;
        return;
    }
    proc_ = std::move(*proc);
}

ProfilerLink::~ProfilerLink() {
    // (Its stdin closes with the channel: it exits, and the kernel detaches
    // its programs.)
    channel_.reset();
}

void ProfilerLink::ask(nlohmann::json request, Answer answer) {
    if (failed_)
        return answer(make_error(EIO, *failed_));
    if (!ready_)
        return (void)waiting_.emplace_back(std::move(request), std::move(answer));
    channel_->send(request);
    asked_.push_back(std::move(answer));
}

void ProfilerLink::on_line(Result<nlohmann::json> line) {
    if (failed_)
        return;
    if (!line)
        return fail(fmt::format("banyan-profiler: {}", line.error().message));
    auto error = json_field<std::string>(*line, "error", "", "banyan-profiler");
    if (!ready_) {
        auto ready = json_field<bool>(*line, "ready", false, "banyan-profiler");
        if (!ready || !error || !*ready)
            return fail(error && !error->empty() ? *error : "banyan-profiler: no ready line");
        ready_ = true;
        for (const auto& [program, why] : json_object_at(*line, {"refused"}).items())
            if (why.is_string())
                log::warning("exec", "banyan-profiler: the {} program cannot be loaded here: {}", program,
                             why.get<std::string>());
        for (auto& [request, answer] : std::exchange(waiting_, {}))
            ask(std::move(request), std::move(answer));
        return;
    }
    if (asked_.empty())
        return fail("banyan-profiler answered what was not asked");
    Answer answer = std::move(asked_.front());
    asked_.pop_front();
    if (!error)
        return answer(error.error());
    if (!error->empty())
        return answer(make_error(EIO, *error));
    auto found = line->find("data");
    answer(found == line->end() ? nlohmann::json::object() : std::move(*found));
}

void ProfilerLink::fail(const std::string& why) {
    if (failed_)
        return;
    failed_ = why;
    log::warning("exec", "banyan-profiler: {}", why);
    // Every answer owed, now (each may ask again: a copy is walked).
    auto waiting = std::exchange(waiting_, {});
    auto asked = std::exchange(asked_, {});
    for (auto& answer : asked)
        answer(make_error(EIO, why));
    for (auto& [request, answer] : waiting)
        answer(make_error(EIO, why));
}

}  // namespace banyan
