// banyan shutdown: stop the whole instance, leaves first.
#include "cmd/cli_util.hpp"

namespace banyan::cli {

void add_shutdown(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand("shutdown", "Shut the instance down (all brokers, leaves first)");
    static bool keep_jobs = false;
    cmd->add_flag("--keep-jobs", keep_jobs,
                  "Leave running jobs running: each broker's shells wait exec.reattach-timeout to be re-attached");
    cmd->callback([&exit_code] {
        Client client = connect_to_instance();
        must(client.rpc("broker.shutdown", {{"keep_jobs", keep_jobs}}, 0));
        exit_code = 0;
    });
}

}  // namespace banyan::cli
