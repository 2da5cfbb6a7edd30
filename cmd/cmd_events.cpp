// banyan events --follow: every job event of the instance (the caller's
// own jobs for a user), one a line, as they are committed (doc/spec/http.md
// §7): for sidecars and log shippers.
#include <csignal>
#include <ctime>

#include <fmt/format.h>

#include "cmd/cli_util.hpp"
#include "core/jobid.hpp"
#include "core/json_field.hpp"

namespace banyan::cli {
namespace {

volatile std::sig_atomic_t stop_signal = 0;

std::string iso_time(double t) {
    std::time_t secs = static_cast<std::time_t>(t);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &tm);
    return fmt::format("{}.{:03d}Z", text, static_cast<int>((t - static_cast<double>(secs)) * 1000));
}

}  // namespace

void add_events(CLI::App& app, int& exit_code) {
    static bool follow = false, json = false;
    auto* cmd = app.add_subcommand("events", "Stream every job event as it happens");
    cmd->add_flag("-f,--follow", follow, "stream events until interrupted (required)");
    cmd->add_flag("--json", json, "one JSON object a line: id, jobid, userid, seq, timestamp, name, context");
    cmd->callback([&exit_code] {
        if (!follow)
            fail("banyan events streams new events: give --follow (a job's past events: banyan job eventlog ID)");
        Client client = connect_to_instance();
        Message request = Message::request("job-manager.events", nlohmann::json::object(), 0);
        request.flags |= msgflag::streaming;
        uint32_t matchtag = must(client.send(std::move(request)));
        for (int s : {SIGINT, SIGTERM, SIGHUP})
            std::signal(s, [](int signo) { stop_signal = signo; });
        std::signal(SIGPIPE, SIG_IGN);
        while (!stop_signal) {
            auto msg = client.recv(std::chrono::milliseconds(250));
            if (!msg && msg.error().code == ETIMEDOUT)
                continue;
            if (!msg)
                fail(msg.error().message);
            if (msg->type != MessageType::response || msg->matchtag != matchtag)
                continue;
            if (msg->errnum != 0)
                fail(msg->error_text());
            auto payload = must(msg->json());
            std::string out;
            for (const auto& ev : payload.contains("events") ? payload["events"] : nlohmann::json::array()) {
                auto id = json_field<uint64_t>(ev, "id", 0, "event");
                auto name = json_field<std::string>(ev, "name", "", "event");
                auto t = json_field<double>(ev, "timestamp", 0.0, "event");
                if (auto e = first_error(id, name, t))
                    fail(fmt::format("unexpected event from the instance: {}", e->message));
                const auto& context = json_object_at(ev, {"context"});
                if (json) {
                    nlohmann::json line = ev;
                    line["jobid"] = format_jobid(*id);
                    out += line.dump() + "\n";
                } else {
                    out += fmt::format("{} {} {} {}\n", iso_time(*t), format_jobid(*id), *name, context.dump());
                }
            }
            // A sidecar reads each batch as it comes; a closed pipe ends us.
            if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout) != 0)
                break;
        }
        // Ends the stream at rank 0 at once, rather than when it next finds us gone.
        Message cancel = Message::request("job-manager.events-cancel", {{"matchtag", matchtag}}, 0);
        cancel.flags |= msgflag::noresponse;
        (void)client.send(std::move(cancel));
        exit_code = 0;
    });
}

}  // namespace banyan::cli
