// banyan usage: core-hours, GPU-hours and CPU-hours used in a window, per
// user and bank or per bank (the sreport habit; doc/spec/accounting.md
// §9). Default: your own, over the last 30 days.
#include <map>

#include <fmt/format.h>

#include "cmd/cli_util.hpp"
#include "core/duration.hpp"
#include "core/json_field.hpp"

namespace banyan::cli {

void add_usage(CLI::App& app, int& exit_code) {
    static std::string user, since = "-30d", until, by = "user";
    static bool all_users = false, json = false;
    auto* cmd = app.add_subcommand("usage", "Core-, GPU- and CPU-hours used, per user and bank or per bank");
    cmd->add_option("--by", by, "user (default: per user and bank) or bank (each bank with its sub-banks')")
        ->check(CLI::IsMember({"user", "bank"}));
    cmd->add_option("-u,--user", user, "USER's usage (another's: instance owner)");
    cmd->add_flag("-A,--all-users", all_users, "every user's (instance owner)");
    cmd->add_option("-S,--since", since,
                    "jobs that ended at or after TIME: -DURATION (-30d, the default), HH:MM[:SS], "
                    "YYYY-MM-DD[ HH:MM], @EPOCH; 'all' for no bound");
    cmd->add_option("-E,--until", until, "jobs that ended before TIME (same forms)");
    cmd->add_flag("--json", json, "print the rows as JSON (seconds)");
    cmd->callback([&exit_code] {
        nlohmann::json body{{"by", by}};
        double now = wall_now();
        if (since != "all")
            body["since"] = moment_option(since, "-S", now);
        if (!until.empty())
            body["until"] = moment_option(until, "-E", now);
        if (all_users)
            body["all"] = true;
        else if (!user.empty())
            body["userid"] = uid_of_user(user, "-u");
        Client client = connect_to_instance();
        auto rows = answer_field<nlohmann::json>(must(client.rpc("accounting.usage", body, 0)), "rows",
                                                 nlohmann::json::array());
        exit_code = 0;
        if (json) {
            fmt::print("{}\n", rows.dump());
            return;
        }
        const char* at = "accounting.usage";
        auto hours = [&](const nlohmann::json& r, const char* key) {
            return fmt::format("{:.2f}", must(json_field<double>(r, key, 0, at)) / 3600);
        };
        bool per_user = by == "user";
        if (per_user)
            fmt::print("{:<12} ", "USER");
        fmt::print("{:<16} {:>8} {:>12} {:>10} {:>10}\n", "BANK", "JOBS", "CORE-HOURS", "GPU-HOURS", "CPU-HOURS");
        for (const auto& r : rows) {
            std::string bank = must(json_field<std::string>(r, "bank", "", at));
            if (per_user)
                fmt::print("{:<12} ", user_name(must(json_field<uint32_t>(r, "userid", 0, at))));
            fmt::print("{:<16} {:>8} {:>12} {:>10} {:>10}\n", bank.empty() ? "-" : bank,
                       must(json_field<uint64_t>(r, "jobs", 0, at)), hours(r, "core_seconds"), hours(r, "gpu_seconds"),
                       hours(r, "cpu"));
        }
    });
}

}  // namespace banyan::cli
