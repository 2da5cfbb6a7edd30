// banyan reservation create|list|delete: advance reservations
// (doc/spec/reservations.md): whole nodes set aside for a window, for some
// users or banks, or for maintenance.
#include <fmt/format.h>

#include "cmd/cli_util.hpp"
#include "core/duration.hpp"
#include "core/json_field.hpp"
#include "sched/constraint.hpp"

namespace banyan::cli {
namespace {

struct CreateOptions {
    std::string name, start = "now", duration, end, hostlist, requirements;
    int64_t nodes = 0;
    std::vector<std::string> users, banks;
    bool maintenance = false;
};

nlohmann::json create_request(const CreateOptions& o) {
    double now = wall_now();
    double start = moment_option(o.start, "--start", now);
    if (o.duration.empty() == o.end.empty())
        fail("give how long it lasts: --duration or --end, one of them");
    double end = 0;
    if (!o.duration.empty()) {
        auto d = parse_duration(o.duration);
        if (!d || *d <= 0)
            fail(fmt::format("--duration {}: expected a duration as 2h or 90m", o.duration));
        end = start + *d;
    } else {
        end = moment_option(o.end, "--end", now);
    }
    nlohmann::json req = {{"name", o.name},
                          {"start", static_cast<int64_t>(std::floor(start))},
                          {"end", static_cast<int64_t>(std::ceil(end))},
                          {"maintenance", o.maintenance}};
    if (o.nodes != 0) {
        if (o.nodes < 0)
            fail(fmt::format("--nodes {}: expected at least 1", o.nodes));
        req["nodes"] = o.nodes;
    }
    if (!o.hostlist.empty())
        req["hostlist"] = o.hostlist;
    if (!o.requirements.empty()) {
        auto c = Constraint::parse_query(o.requirements);
        if (!c)
            fail(fmt::format("--requires '{}': {}", o.requirements, c.error().message));
        req["constraint"] = std::move(*c);
    }
    nlohmann::json uids = nlohmann::json::array();
    for (const auto& u : o.users)
        uids.push_back(uid_of_user(u, "--users"));
    req["users"] = std::move(uids);
    req["banks"] = o.banks;
    return req;
}

std::string names_of_users(const nlohmann::json& uids) {
    std::string out;
    for (const auto& u : uids) {
        auto uid = json_as<uint32_t>(u, "users[]");
        if (!uid)
            continue;
        out += (out.empty() ? "" : ",") + user_name(*uid);
    }
    return out;
}

void print_list(const nlohmann::json& all) {
    double now = wall_now();
    fmt::print("{:<16} {:<19} {:<19} {:<8} {:<20} {}\n", "NAME", "START", "END", "STATE", "NODES", "FOR");
    for (const auto& r : all) {
        const char* at = "reservation list";
        auto start = must(json_field<int64_t>(r, "start", 0, at));
        auto end = must(json_field<int64_t>(r, "end", 0, at));
        bool maintenance = must(json_field(r, "maintenance", false, at));
        std::string users = names_of_users(must(json_field(r, "users", nlohmann::json::array(), at)));
        std::string banks;
        for (const auto& b : must(json_field(r, "banks", nlohmann::json::array(), at)))
            banks += (banks.empty() ? "" : ",") + must(json_as<std::string>(b, "banks[]"));
        std::string who = maintenance ? "maintenance" : "";
        if (!users.empty())
            who += fmt::format("{}users {}", who.empty() ? "" : "; ", users);
        if (!banks.empty())
            who += fmt::format("{}banks {}", who.empty() ? "" : "; ", banks);
        fmt::print("{:<16} {:<19} {:<19} {:<8} {:<20} {}\n", must(json_field<std::string>(r, "name", "", at)),
                   format_moment(static_cast<double>(start)), format_moment(static_cast<double>(end)),
                   now < static_cast<double>(start) ? "waiting" : "active",
                   must(json_field<std::string>(r, "hosts", "", at)), who.empty() ? "owner" : who);
    }
}

}  // namespace

void add_reservation(CLI::App& app, int& exit_code) {
    auto* reservation = app.add_subcommand("reservation", "Set nodes aside for a window of time");
    reservation->require_subcommand(1);
    static CreateOptions o;
    static bool json = false;
    static std::string name;

    auto* create = reservation->add_subcommand("create", "Reserve nodes from --start for --duration");
    create->add_option("NAME", o.name, "its name (jobs run in it with --reservation=NAME)")->required();
    create->add_option("--start", o.start, "when it starts: now (default), +2h, 02:00, 2026-12-01T08:00");
    create->add_option("--duration", o.duration, "how long it lasts: 2h, 90m, 1d");
    create->add_option("--end", o.end, "or when it ends, as --start");
    create->add_option("-N,--nodes", o.nodes, "this many nodes, free for the whole window");
    create->add_option("--hostlist", o.hostlist, "these nodes (node[0-3])");
    create->add_option("--requires", o.requirements, "nodes that meet EXPR (all of them, or --nodes of them)");
    create->add_option("--users", o.users, "users who may run jobs in it (names or uids, comma-separated)")
        ->delimiter(',');
    create->add_option("--banks", o.banks, "banks whose jobs may run in it (comma-separated)")->delimiter(',');
    create->add_flag("--maintenance", o.maintenance, "drain its nodes for its window; no job runs in it");
    create->callback([&exit_code] {
        Client client = connect_to_instance();
        auto answer = must(client.rpc("reservation.create", create_request(o), 0));
        const auto& r = must(json_field(answer, "reservation", nlohmann::json::object(), "reservation.create"));
        fmt::print("{}: {} from {} to {}\n", o.name, must(json_field<std::string>(r, "hosts", "", "reservation")),
                   format_moment(static_cast<double>(must(json_field<int64_t>(r, "start", 0, "reservation")))),
                   format_moment(static_cast<double>(must(json_field<int64_t>(r, "end", 0, "reservation")))));
        exit_code = 0;
    });

    auto* list = reservation->add_subcommand("list", "Every reservation, by start");
    list->add_flag("--json", json, "print JSON");
    list->callback([&exit_code] {
        Client client = connect_to_instance();
        auto answer = must(client.rpc("reservation.list", nlohmann::json::object(), 0));
        auto all = must(json_field(answer, "reservations", nlohmann::json::array(), "reservation.list"));
        json ? fmt::print("{}\n", all.dump()) : print_list(all);
        exit_code = 0;
    });

    auto* remove = reservation->add_subcommand("delete", "End a reservation now");
    remove->add_option("NAME", name, "the reservation")->required();
    remove->callback([&exit_code] {
        Client client = connect_to_instance();
        must(client.rpc("reservation.delete", {{"name", name}}, 0));
        exit_code = 0;
    });
}

}  // namespace banyan::cli
