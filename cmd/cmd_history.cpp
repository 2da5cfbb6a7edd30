// banyan history: finished jobs' usage records, kept for years (the sacct
// habit; doc/spec/accounting.md). Default: your jobs that ended in the last
// day, newest first.
#include <cctype>
#include <ctime>
#include <map>
#include <set>

#include <fmt/format.h>
#include <unistd.h>

#include "cmd/cli_util.hpp"
#include "cmd/output_format.hpp"
#include "core/duration.hpp"
#include "core/json_field.hpp"
#include "core/text.hpp"

namespace banyan::cli {
namespace {

constexpr const char* kDefaultFormat =
    "{id:>14} {user:<8.8} {name:<10.10} {st:>2} {status:>4} {nnodes:>6} {ncores:>6} {elapsed:>9} {cpu:>9} "
    "{maxrss:>7} {end}";

const std::set<std::string>& known_fields() {
    static const std::set<std::string> known = {"id",     "id.dec", "user",    "userid",     "name",     "queue",
                                                "st",     "result", "status",  "exception",  "submit",   "eligible",
                                                "start",  "end",    "elapsed", "time_limit", "nnodes",   "nodelist",
                                                "ncores", "ngpus",  "cpu",     "maxrss",     "totalrss", "gpu_seconds", "bank"};
    return known;
}

std::string local_time(double t) {
    return t > 0 ? format_moment(t) : "-";
}

// Bytes as Slurm's sacct shows memory: K, M, G, T (powers of 1024).
std::string bytes(uint64_t n) {
    const char* units[] = {"", "K", "M", "G", "T"};
    double v = static_cast<double>(n);
    size_t u = 0;
    while (v >= 1024 && u + 1 < std::size(units)) {
        v /= 1024;
        ++u;
    }
    return u == 0 ? std::to_string(n) : fmt::format("{:.{}f}{}", v, v < 10 ? 1 : 0, units[u]);
}

// HH:MM:SS, with D- in front past a day (sacct's elapsed and CPU time).
std::string clock_time(double seconds) {
    auto s = static_cast<uint64_t>(seconds + 0.5);
    uint64_t days = s / 86400;
    std::string hms = fmt::format("{:02}:{:02}:{:02}", s % 86400 / 3600, s % 3600 / 60, s % 60);
    return days > 0 ? fmt::format("{}-{}", days, hms) : hms;
}

std::string value(const nlohmann::json& r, const std::string& field) {
    auto num = [&](const char* key) { return json_field<double>(r, key, 0, "record").value_or(0); };
    auto text = [&](const char* key) { return json_field<std::string>(r, key, "", "record").value_or(""); };
    auto count = [&](const char* key) { return json_field<uint64_t>(r, key, 0, "record").value_or(0); };
    if (field == "id")
        return format_jobid(count("id"));
    if (field == "id.dec")
        return std::to_string(count("id"));
    if (field == "user")
        return user_name(static_cast<uint32_t>(count("userid")));
    if (field == "userid")
        return std::to_string(count("userid"));
    if (field == "st") {
        std::string result = text("result");
        return result == "completed" ? "CD" : result == "failed" ? "F" : result == "canceled" ? "CA" : "TO";
    }
    if (field == "status") {
        auto s = r.find("status");
        return s != r.end() && s->is_number_integer() ? std::to_string(s->get<int64_t>()) : "-";
    }
    if (field == "submit" || field == "eligible" || field == "start" || field == "end")
        return local_time(num(("t_" + field).c_str()));
    if (field == "elapsed" || field == "cpu")
        return clock_time(num(field.c_str()));
    if (field == "time_limit")
        return num("time_limit") > 0 ? clock_time(num("time_limit")) : "-";
    if (field == "maxrss" || field == "totalrss")
        return bytes(count(field.c_str()));
    if (field == "gpu_seconds")
        return fmt::format("{:.0f}", num("gpu_seconds"));
    if (field == "nnodes" || field == "ncores" || field == "ngpus")
        return std::to_string(count(field.c_str()));
    return text(field.c_str());  // name, queue, bank, result, exception, nodelist
}

// -s: results by name or by sacct's short state (CD, F, CA, TO).
nlohmann::json results_of(const std::string& list) {
    static const std::map<std::string, std::string> names = {
        {"completed", "completed"}, {"cd", "completed"}, {"failed", "failed"},      {"f", "failed"},
        {"canceled", "canceled"},   {"ca", "canceled"},  {"cancelled", "canceled"}, {"timeout", "timeout"},
        {"to", "timeout"}};
    nlohmann::json out = nlohmann::json::array();
    for (const auto& word : split_commas(list)) {
        std::string lower;
        for (char c : word)
            lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        auto it = names.find(lower);
        if (it == names.end())
            fail(fmt::format("-s {}: '{}' is not completed, failed, canceled or timeout (or CD, F, CA, TO)", list,
                             word));
        out.push_back(it->second);
    }
    return out;
}

}  // namespace

void add_history(CLI::App& app, int& exit_code) {
    static std::string user, since = "-1d", until, states, name, bank, node, format = kDefaultFormat, delimiter = "|";
    static bool all_users = false, json = false, parsable = false, no_header = false;
    static int64_t count = 1000;
    auto* cmd = app.add_subcommand("history", "List finished jobs and what they used (default: yours of the last day)");
    cmd->add_option("-u,--user", user, "USER: that user's jobs (a name or uid; another's: instance owner)");
    cmd->add_flag("-A,--all-users", all_users, "every user's jobs (instance owner)");
    cmd->add_option("-S,--since", since,
                    "jobs that ended at or after TIME: -DURATION (-1d, the default), "
                    "HH:MM[:SS], YYYY-MM-DD[ HH:MM], @EPOCH; 'all' for no bound");
    cmd->add_option("-E,--until", until, "jobs that ended before TIME (same forms)");
    cmd->add_option("-s,--state", states, "RESULT[,...]: completed, failed, canceled, timeout (or CD, F, CA, TO)");
    cmd->add_option("--name", name, "jobs of this name");
    cmd->add_option("--bank", bank, "jobs charged to this bank");
    cmd->add_option("--node", node, "jobs that ran on this host");
    cmd->add_option("-n,--count", count, "show at most N jobs (1 to 100000; default 1000)");
    cmd->add_option("-o,--format", format, "fields like {id} {user} {elapsed} {cpu} {maxrss}");
    cmd->add_flag("-P,--parsable", parsable, "the fields only, joined by the delimiter, no padding");
    cmd->add_option("--delimiter", delimiter, "what -P puts between fields (default |)");
    cmd->add_flag("--json", json, "print the records as a JSON array");
    cmd->add_flag("--no-header", no_header, "leave out the header line");
    cmd->callback([&exit_code] {
        nlohmann::json body{{"count", count}};
        if (count < 1 || count > 100000)
            fail(fmt::format("-n {}: expected 1 to 100000", count));
        double now = wall_now();
        if (since != "all")
            body["since"] = moment_option(since, "-S", now);
        if (!until.empty())
            body["until"] = moment_option(until, "-E", now);
        if (!states.empty())
            body["results"] = results_of(states);
        if (!name.empty())
            body["name"] = name;
        if (!bank.empty())
            body["bank"] = bank;
        if (!node.empty())
            body["node"] = node;
        if (all_users)
            body["all"] = true;
        else if (!user.empty())
            body["userid"] = uid_of_user(user, "-u");
        OutputFormat layout(format, known_fields());
        Client client = connect_to_instance();
        auto answer = must(client.rpc("accounting.history", body, 0));
        auto records = answer_field<nlohmann::json>(answer, "records", nlohmann::json::array());
        exit_code = 0;
        if (records.size() == static_cast<size_t>(count))
            fmt::print(stderr, "banyan history: the newest {} shown; there may be more (-n, -S)\n", count);
        if (json) {
            // "jobid": the id as text beside the number (as banyan jobs --json).
            for (auto& r : records)
                if (r.is_object())
                    r["jobid"] = value(r, "id");
            fmt::print("{}\n", records.dump());
            return;
        }
        std::string out;
        if (!no_header)
            out +=
                (parsable
                     ? layout.parsable([](const std::string& f) { return f; }, delimiter)
                     : layout.header([](const std::string& f) { return f == "id" || f == "id.dec" ? "jobid" : f; })) +
                "\n";
        for (const auto& r : records) {
            auto of = [&r](const std::string& field) { return value(r, field); };
            out += (parsable ? layout.parsable(of, delimiter) : layout.render(of)) + "\n";
        }
        fmt::print("{}", out);
    });
}

}  // namespace banyan::cli
