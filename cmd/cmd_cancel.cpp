// banyan cancel ID...|--all: cancel jobs (pending ones never run; running
// ones get SIGTERM, then SIGKILL 5 s later).
#include <set>

#include <fmt/format.h>

#include "cmd/cli_util.hpp"
#include "cmd/progress.hpp"

namespace banyan::cli {

void add_cancel(CLI::App& app, int& exit_code) {
    static std::vector<std::string> ids;
    static bool all = false, progress = false;
    static std::string message;
    auto* cmd = app.add_subcommand("cancel", "Cancel jobs");
    cmd->add_option("ID", ids, "job ids");
    cmd->add_flag("--all", all, "cancel all of your active jobs");
    cmd->add_flag("--progress", progress, "a progress bar on stderr even when it is not a terminal (--all)");
    cmd->add_option("-m,--message", message, "the reason, recorded in the eventlog");
    cmd->callback([&exit_code] {
        if (all == !ids.empty())
            fail("give job IDs or --all");
        Client client = connect_to_instance();
        // Each {"id"} or, for an element of an array (ID[INDEX], made or
        // not yet), {"id", "index"}.
        std::vector<nlohmann::json> targets;
        if (all) {
            // An array's elements end with it: canceled once, as the array.
            JobList listing = list_jobs(client, nlohmann::json::object());
            std::set<JobId> arrays;
            for (size_t i = 0; i < listing.size(); i++)
                if (listing.get(i, "array").is_object())
                    arrays.insert(listing.get(i, "id").get<JobId>());
            for (size_t i = 0; i < listing.size(); i++) {
                const auto& of = listing.get(i, "array_of");
                if (!of.is_object() || !arrays.count(json_field<JobId>(of, "id", 0, "array_of").value_or(0)))
                    targets.push_back({{"id", listing.get(i, "id").get<JobId>()}});
            }
        } else {
            for (const auto& text : ids)
                targets.push_back(job_request(text));
        }
        std::set<uint32_t> in_flight;
        for (auto& target : targets) {
            target["note"] = message;
            in_flight.insert(must(client.send(Message::request("job-manager.cancel", target, 0))));
        }
        exit_code = 0;
        ProgressBar bar("cancel", all ? targets.size() : 0, progress_wanted(progress));
        while (!in_flight.empty()) {
            Message m = must(client.recv());
            auto it = in_flight.find(m.matchtag);
            if (it == in_flight.end())
                continue;
            if (auto r = response_payload(m); !r) {
                fmt::print(stderr, "banyan cancel: {}\n", r.error().message);
                exit_code = 1;
            }
            in_flight.erase(it);
            bar.advance();
        }
        if (all)
            fmt::print(stderr, "banyan cancel: canceled {} job{}\n", targets.size(), targets.size() == 1 ? "" : "s");
    });
}

}  // namespace banyan::cli
