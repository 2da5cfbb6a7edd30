// banyan uptime: the instance's state, age and size in one line.
#include <ctime>

#include <pwd.h>
#include <unistd.h>

#include <fmt/format.h>

#include "cmd/cli_util.hpp"

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
        fmt::print(" {} {} {}, owner {}, size {}, {} online\n", clock, info.value("state", "?"),
                   human_duration(info.value("uptime", 0.0)), pw ? pw->pw_name : "?", info.value("size", 0),
                   info.value("online", 0));
        exit_code = 0;
    });
}

}  // namespace banyan::cli
