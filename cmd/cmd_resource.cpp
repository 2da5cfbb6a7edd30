// banyan resource list|status|drain|undrain|R: the cluster's resources.
#include <ctime>

#include <fmt/format.h>

#include "cmd/cli_util.hpp"
#include "core/duration.hpp"
#include "core/json_field.hpp"

namespace banyan::cli {
namespace {

nlohmann::json ask(const std::string& topic, const nlohmann::json& body = nlohmann::json::object()) {
    Client client = connect_to_instance();
    return must(client.rpc(topic, body, 0));
}

void print_list(const nlohmann::json& body) {
    fmt::print("{:>10} {:>6} {:>7} {:>6} {}\n", "STATE", "NNODES", "NCORES", "NGPUS", "NODELIST");
    for (const char* state : {"free", "allocated", "down"}) {
        const auto& s = body.value(state, nlohmann::json::object());
        fmt::print("{:>10} {:>6} {:>7} {:>6} {}\n", state, s.value("nnodes", 0), s.value("ncores", 0),
                   s.value("ngpus", 0), s.value("nodelist", ""));
    }
}

void print_status(const nlohmann::json& body) {
    fmt::print("{:>8} {:>6} {:<12} {:<20} {}\n", "STATE", "NNODES", "RANKS", "NODELIST", "REASON");
    for (const auto& s : must(json_field(body, "states", nlohmann::json::array(), "resource.status"))) {
        const char* at = "resource.status.states[]";
        std::string reason;
        if (s.contains("reason")) {
            auto text = must(json_field<std::string>(s, "reason", "", at));
            auto when = must(json_field(s, "timestamp", 0.0, at));
            reason = fmt::format("{}{}({})", text, text.empty() ? "" : " ", format_moment(when));
        }
        fmt::print("{:>8} {:>6} {:<12} {:<20} {}\n", must(json_field<std::string>(s, "state", "", at)),
                   must(json_field<int64_t>(s, "nnodes", 0, at)), must(json_field<std::string>(s, "ranks", "", at)),
                   must(json_field<std::string>(s, "nodelist", "", at)), reason);
    }
}

}  // namespace

void add_resource(CLI::App& app, int& exit_code) {
    auto* resource = app.add_subcommand("resource", "Show and manage the cluster's resources");
    resource->require_subcommand(1);
    static bool json = false;

    // A read-only view: TOPIC's answer printed by PRINT, or as JSON.
    auto add_view = [&](const char* name, const char* help, const char* topic, void (*print)(const nlohmann::json&)) {
        auto* view = resource->add_subcommand(name, help);
        view->add_flag("--json", json, "print JSON");
        view->callback([&exit_code, topic, print] {
            auto body = ask(topic);
            json ? fmt::print("{}\n", body.dump()) : print(body);
            exit_code = 0;
        });
    };
    add_view("list", "Free, allocated and down nodes, cores and GPUs", "resource.list", print_list);
    add_view("status", "Each node's state: avail, drained, offline, torpid", "resource.status", print_status);

    static std::string targets;
    static std::vector<std::string> reason;
    auto* drain = resource->add_subcommand("drain", "Take nodes out of scheduling; running jobs finish");
    drain->add_option("TARGETS", targets, "hostlist or rank idset")->required();
    drain->add_option("REASON", reason, "why (shown by resource status)");
    drain->callback([&exit_code] {
        std::string why;
        for (const auto& word : reason)
            why += (why.empty() ? "" : " ") + word;
        ask("resource.drain", {{"targets", targets}, {"reason", why}});
        exit_code = 0;
    });

    auto* undrain = resource->add_subcommand("undrain", "Return drained nodes to scheduling");
    undrain->add_option("TARGETS", targets, "hostlist or rank idset")->required();
    undrain->callback([&exit_code] {
        ask("resource.undrain", {{"targets", targets}});
        exit_code = 0;
    });

    auto* r = resource->add_subcommand("R", "Print the instance's resources as R v1 (JSON)");
    r->callback([&exit_code] {
        fmt::print("{}\n", ask("resource.R").dump());
        exit_code = 0;
    });
}

}  // namespace banyan::cli
