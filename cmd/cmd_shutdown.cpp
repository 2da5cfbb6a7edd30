// banyan shutdown: stop the whole instance, leaves first.
#include "cmd/cli_util.hpp"
#include "core/json_field.hpp"

namespace banyan::cli {

void add_shutdown(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand("shutdown", "Shut the instance down (all brokers, leaves first)");
    static bool keep_jobs = false;
    cmd->add_flag("--keep-jobs", keep_jobs,
                  "Leave running jobs running: each broker's shells wait exec.reattach-timeout to be re-attached");
    cmd->callback([&exit_code] {
        Client client = connect_to_instance();
        if (keep_jobs) {
            // Brokers of protocol 1 ignore the request's keep_jobs and end
            // every job (doc/spec/overlay.md §3.1): refused rather than that.
            auto info = must(client.rpc("broker.info", nlohmann::json::object(), 0));
            uint32_t protocol = json_field<uint32_t>(info, "protocol", 1u, "broker.info").value_or(1u);
            if (protocol < 2)
                fail(
                    fmt::format("rank 0 speaks overlay protocol {}, which ends the jobs at a shutdown: upgrade it "
                                "first (banyan-broker(8))",
                                protocol));
        }
        must(client.rpc("broker.shutdown", {{"keep_jobs", keep_jobs}}, 0));
        exit_code = 0;
    });
}

}  // namespace banyan::cli
