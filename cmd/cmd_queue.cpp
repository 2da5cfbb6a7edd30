// banyan queue list|status|enable|disable|start|stop: the named queues
// (doc/spec/sched.md section 8). Enabled/disabled is the job manager's
// (submissions); started/stopped is the scheduler's (jobs start or wait).
#include <fmt/format.h>

#include "cmd/cli_util.hpp"
#include "core/duration.hpp"
#include "core/json_field.hpp"

namespace banyan::cli {
namespace {

// The job manager's and the scheduler's view of each queue, joined.
nlohmann::json queues() {
    Client client = connect_to_instance();
    auto jm = must(client.rpc("job-manager.queue-list", nlohmann::json::object(), 0));
    auto sched = must(client.rpc("sched.queue-list", nlohmann::json::object(), 0));
    nlohmann::json all = must(json_field(jm, "queues", nlohmann::json::array(), "job-manager.queue-list"));
    const auto started = must(json_field(sched, "queues", nlohmann::json::array(), "sched.queue-list"));
    for (auto& q : all)
        for (const auto& s : started)
            if (s.is_object() && q.is_object() && s.contains("name") && q.contains("name") && s["name"] == q["name"]) {
                q["started"] = must(json_field(s, "started", true, "sched.queue-list.queues[]"));
                q["stop-reason"] = must(json_field<std::string>(s, "stop-reason", "", "sched.queue-list.queues[]"));
            }
    return all;
}

std::string limit(double value, bool duration) {
    if (value <= 0)
        return "-";
    return duration ? format_duration(value) : fmt::format("{}", static_cast<int64_t>(value));
}

void print_list(const nlohmann::json& all) {
    fmt::print("{:<12} {:>3} {:>8} {:>8} {:>6} {:>9} {}\n", "QUEUE", "DEF", "MAXTIME", "MAXNODES", "MAXACT", "STATE",
               "REQUIRES");
    for (const auto& q : all) {
        const char* at = "queue list";
        auto enabled = must(json_field(q, "enabled", true, at));
        auto started = must(json_field(q, "started", true, at));
        fmt::print("{:<12} {:>3} {:>8} {:>8} {:>6} {:>9} {}\n", must(json_field<std::string>(q, "name", "", at)),
                   must(json_field(q, "default", false, at)) ? "*" : "",
                   limit(must(json_field(q, "max-duration", 0.0, at)), true),
                   limit(static_cast<double>(must(json_field<int64_t>(q, "max-nodes", 0, at))), false),
                   limit(static_cast<double>(must(json_field<int64_t>(q, "max-active-per-user", 0, at))), false),
                   fmt::format("{}/{}", enabled ? "en" : "dis", started ? "start" : "stop"),
                   must(json_field<std::string>(q, "requires", "", at)));
    }
}

void print_status(const nlohmann::json& all) {
    for (const auto& q : all) {
        const char* at = "queue status";
        std::string name = must(json_field<std::string>(q, "name", "", at));
        bool enabled = must(json_field(q, "enabled", true, at));
        bool started = must(json_field(q, "started", true, at));
        std::string why_disabled = must(json_field<std::string>(q, "disabled-reason", "", at));
        std::string why_stopped = must(json_field<std::string>(q, "stop-reason", "", at));
        fmt::print("{}: {}{}{}, {}{}{}; {} pending, {} running\n", name, enabled ? "enabled" : "disabled",
                   why_disabled.empty() ? "" : ": ", why_disabled, started ? "started" : "stopped",
                   why_stopped.empty() ? "" : ": ", why_stopped, must(json_field<int64_t>(q, "pending", 0, at)),
                   must(json_field<int64_t>(q, "running", 0, at)));
    }
}

}  // namespace

void add_queue(CLI::App& app, int& exit_code) {
    auto* queue = app.add_subcommand("queue", "Show and control the named queues");
    queue->require_subcommand(1);
    static bool json = false;
    static std::string name, reason_text;

    auto* list = queue->add_subcommand("list", "Each queue's limits, state and nodes");
    list->add_flag("--json", json, "print JSON");
    list->callback([&exit_code] {
        auto all = queues();
        json ? fmt::print("{}\n", all.dump()) : print_list(all);
        exit_code = 0;
    });
    auto* status = queue->add_subcommand("status", "Whether each queue takes and starts jobs, and why not");
    status->add_option("QUEUE", name, "one queue (default: all)");
    status->callback([&exit_code] {
        auto all = queues();
        nlohmann::json shown = nlohmann::json::array();
        for (const auto& q : all)
            if (name.empty() || (q.contains("name") && q["name"] == name))
                shown.push_back(q);
        if (!name.empty() && shown.empty())
            fail(fmt::format("queue status: unknown queue '{}'", name));
        print_status(shown);
        exit_code = 0;
    });
    // enable/disable: the job manager; start/stop: the scheduler.
    struct Action {
        const char* name;
        const char* help;
        const char* topic;
        const char* flag;
        bool value;
    };
    static const Action actions[] = {
        {"enable", "Take submissions again", "job-manager.queue-enable", "enable", true},
        {"disable", "Refuse submissions (with --reason); queued jobs stay", "job-manager.queue-enable", "enable",
         false},
        {"start", "Start jobs again", "sched.queue-start", "start", true},
        {"stop", "Start no more jobs (with --reason); they stay pending", "sched.queue-start", "start", false},
    };
    for (const Action& a : actions) {
        auto* sub = queue->add_subcommand(a.name, a.help);
        sub->add_option("QUEUE", name, "the queue, or all (default)");
        if (!a.value)
            sub->add_option("--reason", reason_text, "why, shown by queue status and in refusals");
        sub->callback([&exit_code, &a] {
            Client client = connect_to_instance();
            must(client.rpc(a.topic, {{"queue", name}, {a.flag, a.value}, {"reason", reason_text}}, 0));
            exit_code = 0;
        });
    }
}

}  // namespace banyan::cli
