// banyan ready: exits 0 once the instance runs (its quorum of ranks is
// online), 1 with one line saying what it waits for otherwise. A
// Kubernetes readiness probe, or a script's wait (--wait).
#include <chrono>

#include <fmt/format.h>

#include "cmd/cli_util.hpp"
#include "core/config.hpp"
#include "core/json_field.hpp"

namespace banyan::cli {

void add_ready(CLI::App& app, int& exit_code) {
    static bool wait = false;
    static std::string timeout_text = "0";
    auto* cmd = app.add_subcommand("ready", "Exit 0 if the instance runs (its quorum of ranks is online), else 1");
    cmd->add_flag("-w,--wait", wait, "wait until it runs");
    cmd->add_option("-t,--timeout", timeout_text, "with --wait: give up after this long (e.g. 30s; default: never)");
    cmd->callback([&exit_code] {
        double timeout = must(parse_duration(timeout_text));
        Client client = connect_to_instance();
        if (wait) {
            std::optional<std::chrono::milliseconds> limit;
            if (timeout > 0)
                limit = std::chrono::milliseconds(static_cast<int64_t>(timeout * 1000));
            auto ready = client.rpc("broker.ready", nlohmann::json::object(), 0, limit);
            if (ready) {
                exit_code = 0;
                return;
            }
            if (ready.error().code != ETIMEDOUT)
                fail(ready.error().message);
        }
        auto info = must(client.rpc("broker.info", nlohmann::json::object(), 0));
        auto state = json_field(info, "state", std::string("?"));
        auto online = json_field(info, "online", uint32_t{0});
        auto size = json_field(info, "size", uint32_t{0});
        auto quorum = json_field(info, "quorum", uint32_t{0});
        if (auto e = first_error(state, online, size, quorum))
            fail(fmt::format("unexpected reply from the instance: {}", e->message));
        if (*state == "run") {
            exit_code = 0;
            return;
        }
        fail(fmt::format("not ready: the instance is in state {}, {} of {} ranks online (it runs at {})", *state,
                         *online, *size, *quorum));
    });
}

}  // namespace banyan::cli
