// banyan shutdown: stop the whole instance, leaves first.
#include "cmd/cli_util.hpp"

namespace banyan::cli {

void add_shutdown(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand("shutdown", "Shut the instance down (all brokers, leaves first)");
    cmd->callback([&exit_code] {
        Client client = connect_to_instance();
        must(client.rpc("broker.shutdown", nlohmann::json::object(), 0));
        exit_code = 0;
    });
}

}  // namespace banyan::cli
