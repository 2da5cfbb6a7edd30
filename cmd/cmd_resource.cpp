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

bool show_properties = false;

void print_list(const nlohmann::json& body) {
    fmt::print("{:>10} {:>6} {:>7} {:>6} {}\n", "STATE", "NNODES", "NCORES", "NGPUS", "NODELIST");
    for (const char* state : {"free", "allocated", "down"}) {
        std::string at = fmt::format("resource.list.{}", state);
        const auto& s = json_object_at(body, {state});
        fmt::print("{:>10} {:>6} {:>7} {:>6} {}\n", state, must(json_field<int64_t>(s, "nnodes", 0, at)),
                   must(json_field<int64_t>(s, "ncores", 0, at)), must(json_field<int64_t>(s, "ngpus", 0, at)),
                   must(json_field<std::string>(s, "nodelist", "", at)));
    }
    if (!show_properties)
        return;
    fmt::print("\n{:<24} {:>6} {:>6} {}\n", "PROPERTY", "NNODES", "NFREE", "NODELIST");
    for (const auto& [name, p] : json_object_at(body, {"properties"}).items()) {
        std::string at = "resource.list.properties." + name;
        fmt::print("{:<24} {:>6} {:>6} {}\n", name, must(json_field<int64_t>(p, "nnodes", 0, at)),
                   must(json_field<int64_t>(p, "nfree", 0, at)), must(json_field<std::string>(p, "nodelist", "", at)));
    }
}

void print_status(const nlohmann::json& body) {
    if (show_properties)
        fmt::print("{:>8} {:>6} {:<12} {:<20} {:<30} {}\n", "STATE", "NNODES", "RANKS", "NODELIST", "PROPERTIES",
                   "REASON");
    else
        fmt::print("{:>8} {:>6} {:<12} {:<20} {}\n", "STATE", "NNODES", "RANKS", "NODELIST", "REASON");
    for (const auto& s : must(json_field(body, "states", nlohmann::json::array(), "resource.status"))) {
        const char* at = "resource.status.states[]";
        std::string reason;
        if (s.contains("reason")) {
            auto text = must(json_field<std::string>(s, "reason", "", at));
            auto when = must(json_field(s, "timestamp", 0.0, at));
            reason = fmt::format("{}{}({})", text, text.empty() ? "" : " ", format_moment(when));
        }
        auto state = must(json_field<std::string>(s, "state", "", at));
        auto nnodes = must(json_field<int64_t>(s, "nnodes", 0, at));
        auto ranks = must(json_field<std::string>(s, "ranks", "", at));
        auto nodelist = must(json_field<std::string>(s, "nodelist", "", at));
        if (show_properties)
            fmt::print("{:>8} {:>6} {:<12} {:<20} {:<30} {}\n", state, nnodes, ranks, nodelist,
                       must(json_field<std::string>(s, "properties", "", at)), reason);
        else
            fmt::print("{:>8} {:>6} {:<12} {:<20} {}\n", state, nnodes, ranks, nodelist, reason);
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
        view->add_flag("--properties", show_properties, "also show the nodes' properties");
        view->callback([&exit_code, topic, print] {
            auto body = ask(topic, {{"properties", show_properties}});
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
        auto answer = ask("resource.drain", {{"targets", targets}, {"reason", why}});
        // Which ranks the targets named (a host name may be several
        // brokers'), and those that kept a reason of their own.
        std::string changed = json_field<std::string>(answer, "changed", "").value_or("");
        std::string already = json_field<std::string>(answer, "already", "").value_or("");
        if (!changed.empty())
            fmt::print("drained rank {}\n", changed);
        if (!already.empty())
            fmt::print("rank {} drained already: its reason is kept (undrain it first to give another)\n", already);
        exit_code = 0;
    });

    auto* undrain = resource->add_subcommand("undrain", "Return drained nodes to scheduling");
    undrain->add_option("TARGETS", targets, "hostlist or rank idset")->required();
    undrain->callback([&exit_code] {
        auto answer = ask("resource.undrain", {{"targets", targets}});
        if (std::string changed = json_field<std::string>(answer, "changed", "").value_or(""); !changed.empty())
            fmt::print("undrained rank {}\n", changed);
        exit_code = 0;
    });

    auto* r = resource->add_subcommand("R", "Print the instance's resources as R v1 (JSON)");
    r->callback([&exit_code] {
        fmt::print("{}\n", ask("resource.R").dump());
        exit_code = 0;
    });
}

}  // namespace banyan::cli
