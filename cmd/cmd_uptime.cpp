// banyan uptime: the instance's state, age and size in one line.
#include <ctime>

#include <pwd.h>
#include <unistd.h>

#include <fmt/format.h>

#include "cmd/cli_util.hpp"
#include "core/json_field.hpp"

namespace banyan::cli {
namespace {

std::string human_duration(double seconds) {
    if (seconds < 60)
        return fmt::format("{:.1f}s", seconds);
    if (seconds < 3600)
        return fmt::format("{:.1f}m", seconds / 60);
    if (seconds < 86400)
        return fmt::format("{:.1f}h", seconds / 3600);
    return fmt::format("{:.1f}d", seconds / 86400);
}

}  // namespace

void add_uptime(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand("uptime", "Show the instance's state, uptime and size");
    cmd->callback([&exit_code] {
        Client client = connect_to_instance();
        auto info = must(client.rpc("broker.info", nlohmann::json::object(), 0));
        std::time_t now = std::time(nullptr);
        char clock[16];
        std::strftime(clock, sizeof clock, "%H:%M:%S", std::localtime(&now));
        const passwd* pw = getpwuid(getuid());
        auto state = json_field(info, "state", std::string("?"));
        auto uptime = json_field(info, "uptime", 0.0);
        auto size = json_field(info, "size", uint32_t{0});
        auto online = json_field(info, "online", uint32_t{0});
        if (auto e = first_error(state, uptime, size, online))
            fail(fmt::format("unexpected reply from the instance: {}", e->message));
        // The HTTP address when the instance serves one (http.info).
        std::string http;
        if (auto h = client.rpc("http.info", nlohmann::json::object(), 0))
            http =
                fmt::format(", http http://{}", json_field<std::string>(*h, "listen", "", "http.info").value_or("?"));
        fmt::print(" {} {} {}, owner {}, size {}, {} online{}\n", clock, *state, human_duration(*uptime),
                   pw ? pw->pw_name : "?", *size, *online, http);
        exit_code = 0;
    });
}

}  // namespace banyan::cli
