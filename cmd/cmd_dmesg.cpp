// banyan dmesg: print a broker's recent log lines.
#include <fmt/format.h>

#include "cmd/cli_util.hpp"

namespace banyan::cli {

void add_dmesg(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand("dmesg", "Print a broker's recent log lines");
    static int64_t rank = -1;
    cmd->add_option("-r,--rank", rank, "the broker to ask (default: the local one)");
    cmd->callback([&exit_code] {
        Client client = connect_to_instance();
        uint32_t nodeid = rank < 0 ? kNodeIdAny : static_cast<uint32_t>(rank);
        auto body = must(client.rpc("broker.dmesg", nlohmann::json::object(), nodeid));
        for (const auto& line : answer_field<nlohmann::json>(body, "lines", nlohmann::json::array()))
            fmt::print("{}\n", line.is_string() ? line.get<std::string>() : line.dump());
        exit_code = 0;
    });
}

}  // namespace banyan::cli
