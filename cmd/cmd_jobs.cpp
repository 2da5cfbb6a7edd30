// banyan jobs: list jobs (default: your active ones). Columns JOBID USER
// NAME ST NTASKS NNODES TIME INFO; -o picks fields, --json prints raw.
#include <ctime>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include "cmd/cli_util.hpp"
#include "cmd/output_format.hpp"
#include "core/duration.hpp"
#include "core/idset.hpp"
#include "core/json_field.hpp"
#include "sched/job_filter.hpp"

namespace banyan::cli {
namespace {

constexpr const char* kDefaultFormat =
    "{id:>14} {user:<8.8} {name:<10.10} {st:>2} {ntasks:>6} {nnodes:>6} {time:>8} {info}";
// --start: pending jobs and when they are expected to start.
constexpr const char* kStartFormat = "{id:>14} {user:<8.8} {name:<10.10} {st:>2} {nnodes:>6} {start:>19} {info}";

double now_seconds() {
    return static_cast<double>(std::time(nullptr));
}

// One row of a JobList, read like a JSON object.
struct JobView {
    const JobList& list;
    size_t row;
    const nlohmann::json& operator[](std::string_view name) const { return list.get(row, name); }
    bool contains(std::string_view name) const { return !(*this)[name].is_null(); }
    // Typed reads of the broker's reply: a field of another type reads as
    // `fallback`, never an exception.
    std::string text(std::string_view name, const char* fallback) const {
        const auto& v = (*this)[name];
        return v.is_string() ? v.get<std::string>() : fallback;
    }
    template <class T>
    T number(std::string_view name, T fallback) const {
        const auto& v = (*this)[name];
        return v.is_number() ? v.get<T>() : fallback;
    }
};

std::string short_state(const JobView& j) {
    static const std::map<std::string, std::string> states = {
        {"depend", "D"}, {"priority", "P"}, {"sched", "S"}, {"run", "R"}, {"cleanup", "C"}};
    static const std::map<std::string, std::string> results = {
        {"completed", "CD"}, {"failed", "F"}, {"canceled", "CA"}, {"timeout", "TO"}};
    std::string state = j.text("state", "");
    if (state == "inactive")
        return results.count(j.text("result", "")) ? results.at(j.text("result", "")) : "I";
    return states.count(state) ? states.at(state) : "?";
}

std::string run_time(const JobView& j) {
    double start = j.number("t_run", 0.0);
    if (start <= 0)
        return "-";
    double end = j.number("t_cleanup", 0.0) > 0 ? j["t_cleanup"].get<double>() : now_seconds();
    return format_duration(end - start);
}

// A job array (arrays.md §4): ID[TO_MAKE%THROTTLE] while indexes remain
// to make; an element: ID[INDEX].
std::string job_id_text(const JobView& j) {
    JobId id = j["id"].get<JobId>();
    if (const auto& of = j["array_of"]; of.is_object())
        return format_element(json_field<JobId>(of, "id", 0, "array_of").value_or(0),
                              json_field<uint32_t>(of, "index", 0, "array_of").value_or(0));
    const auto& array = j["array"];
    std::string to_make = array.is_object() ? json_field<std::string>(array, "to_make", "", "array").value_or("") : "";
    if (to_make.empty())
        return format_jobid(id);
    uint32_t throttle = json_field<uint32_t>(array, "throttle", 0, "array").value_or(0);
    return fmt::format("{}[{}{}]", format_jobid(id), to_make, throttle ? fmt::format("%{}", throttle) : "");
}

// An array still pending: how many of its elements are active, and
// whether the throttle holds back the rest.
std::string array_info(const nlohmann::json& array) {
    auto count = [&](const char* key) { return json_field<uint64_t>(array, key, 0, "array").value_or(0); };
    uint64_t active = count("active"), throttle = count("throttle");
    if (throttle > 0 && active >= throttle)
        return fmt::format("throttled ({} active)", active);
    return fmt::format("{} active, {} of {} made", active, count("made"), count("size"));
}

// What the scheduler says of a pending job (sched.queue): why it waits,
// and when it is reserved to start, if it is.
struct Waiting {
    std::string reason;
    std::optional<int64_t> t_estimate;
};
using WaitingJobs = std::map<JobId, Waiting>;

std::string info(const JobView& j, const WaitingJobs& waiting) {
    std::string state = j.text("state", "");
    if (state == "depend") {
        std::string deps;
        const auto& list = j["dependencies"];
        for (const auto& d : list.is_array() ? list : nlohmann::json::array())
            deps += (deps.empty() ? "" : ",") + d.get<std::string>();
        return "depends on " + deps;
    }
    if (state == "priority" || state == "sched") {
        if (j.number("priority", -1) == 0)
            return "held (urgency 0)";
        if (std::string limit = j.text("limit", ""); !limit.empty())
            return limit;  // waits under a bank's limit: not asked of the scheduler
        if (j["array"].is_object())
            return array_info(j["array"]);
        auto it = waiting.find(j["id"].get<JobId>());
        return it != waiting.end() ? it->second.reason : "";
    }
    if (state == "inactive" && j.contains("exception"))
        return json_field<std::string>(j["exception"], "type", "", "exception").value_or("") + ": " +
               json_field<std::string>(j["exception"], "note", "", "exception").value_or("");
    if (j.number("t_run", 0.0) <= 0)
        return "";
    // A running nested instance (banyan batch, banyan alloc) says so.
    return (state == "run" && j.contains("instance") ? "instance on " : "") + j.text("nodelist", "");
}

// The scheduler's reserved start of a pending job, if it has one.
std::optional<int64_t> estimate(const JobView& j, const WaitingJobs& waiting) {
    std::string state = j.text("state", "");
    if (state != "sched" && state != "priority")
        return std::nullopt;
    auto it = waiting.find(j["id"].get<JobId>());
    return it != waiting.end() ? it->second.t_estimate : std::nullopt;
}

// When it started, or for a pending job when it is reserved to (as
// squeue --start): local time, "-" when neither is known.
std::string start(const JobView& j, const WaitingJobs& waiting) {
    if (double t = j.number("t_run", 0.0); t > 0)
        return format_moment(t);
    auto t = estimate(j, waiting);
    return t ? format_moment(static_cast<double>(*t)) : "-";
}

// The value of `field` for one job, as text.
std::string field(const JobView& j, const std::string& name, const WaitingJobs& waiting) {
    if (name == "id")
        return job_id_text(j);
    if (name == "id.dec")
        return std::to_string(j["id"].get<JobId>());
    if (name == "user")
        return user_name(j.number("userid", 0u));
    if (name == "st")
        return short_state(j);
    if (name == "time")
        return run_time(j);
    if (name == "info")
        return info(j, waiting);
    if (name == "start")
        return start(j, waiting);
    if (name == "t_estimate") {
        auto t = estimate(j, waiting);
        return t ? std::to_string(*t) : "";
    }
    if (name == "nnodes" && j.number("nnodes", 0) == 0)
        return "-";  // not asked for, not yet allocated
    if (!j.contains(name))
        return "";
    const auto& v = j[name];
    return v.is_string() ? v.get<std::string>() : v.dump();
}

const std::set<std::string>& known_fields() {
    static const std::set<std::string> known = {"id",       "id.dec",   "user",     "name",     "st",    "state",
                                                "result",   "ntasks",   "nnodes",   "time",     "info",  "urgency",
                                                "priority", "nodelist", "status",   "t_submit", "t_run", "t_inactive",
                                                "userid",   "queue",    "instance", "bank",     "start", "t_estimate"};
    return known;
}

std::string title_of(const std::string& field) {
    return field == "id" || field == "id.dec" ? "jobid" : field;
}

// Why pending jobs wait and when they are reserved to start: the
// scheduler's (sched.queue), asked only when a pending job is listed and
// something of it is shown.
WaitingJobs waiting_jobs(Client& client, const JobList& jobs, bool wanted) {
    WaitingJobs waiting;
    bool any_pending = false;
    for (size_t i = 0; i < jobs.size(); i++)
        any_pending = any_pending || JobView{jobs, i}.text("state", "") == "sched";
    if (!any_pending || !wanted)
        return waiting;
    if (auto q = client.rpc("sched.queue", nlohmann::json::object(), 0))
        for (const auto& p : json_array_at(*q, "jobs")) {
            Waiting w{json_field<std::string>(p, "reason", "", "reason").value_or(""), std::nullopt};
            if (auto t = json_field<int64_t>(p, "t_estimate", -1, "t_estimate"); t && *t >= 0)
                w.t_estimate = *t;
            waiting[json_field<JobId>(p, "id", 0, "id").value_or(0)] = std::move(w);
        }
    return waiting;
}

// The listing as text.
std::string table(Client& client, const JobList& jobs, const OutputFormat& format, bool with_header) {
    WaitingJobs waiting =
        waiting_jobs(client, jobs, format.has("info") || format.has("start") || format.has("t_estimate"));
    std::string out;
    if (with_header)
        out = format.header(title_of) + "\n";
    for (size_t i = 0; i < jobs.size(); i++)
        out += format.render([&](const std::string& name) { return field(JobView{jobs, i}, name, waiting); }) + "\n";
    return out;
}

}  // namespace

void add_jobs(CLI::App& app, int& exit_code) {
    static bool all_states = false, all_users = false, json = false, no_header = false, starts = false;
    static std::string filter, format = kDefaultFormat, user;
    static int64_t count = 0;
    auto* cmd = app.add_subcommand("jobs", "List jobs (default: your active jobs)");
    cmd->add_flag("-a", all_states, "all states, inactive jobs too");
    cmd->add_flag("-A", all_users, "all users' jobs (instance owner)");
    cmd->add_option("-f,--filter", filter, "STATE[,...]: pending, running, active, inactive, a state or a result");
    cmd->add_option("-o,--format", format, "fields like {id} {user} {name:<10} {st} {info}");
    cmd->add_option("-n,--count", count, "show at most N jobs");
    cmd->add_option("-u,--user", user, "USER: that user's jobs (a name or uid; another's: instance owner)");
    cmd->add_flag("--start", starts,
                  "pending jobs and when the scheduler expects them to start (the format's {start})");
    cmd->add_flag("--json", json, "print the jobs as a JSON array");
    cmd->add_flag("--no-header", no_header, "leave out the header line");
    cmd->callback([&exit_code] {
        nlohmann::json body{{"all_users", all_users}};
        std::set<std::string> results;
        if (starts) {
            if (!filter.empty() || all_states)
                fail("--start lists pending jobs: give it without -f or -a");
            filter = "pending";
            if (format == kDefaultFormat)
                format = kStartFormat;
        }
        if (!filter.empty()) {
            auto parsed = parse_job_filter(filter);
            if (!parsed)
                fail("--filter=" + parsed.error().message);
            body["states"] = parsed->states;
            results = parsed->results;
        } else if (all_states) {
            body["states"] = {"depend", "priority", "sched", "run", "cleanup", "inactive"};
        }
        std::optional<uint32_t> uid;
        if (!user.empty()) {
            uid = uid_of_user(user, "-u");
            if (*uid != getuid())
                body["all_users"] = true;  // (the broker refuses it to a user who is not the owner)
        }
        if (count > 0 && results.empty() && !uid)
            body["max"] = count;
        OutputFormat layout(format, known_fields());
        Client client = connect_to_instance();
        JobList jobs = list_jobs(client, body);
        // What the broker cannot select (results, a user) is selected
        // here, and only then counted.
        // An array whose elements are all made is listed by them alone,
        // until -a (or a filter) asks for everything.
        bool hide_made_arrays = filter.empty() && !all_states;
        if (!results.empty() || uid || count > 0 || hide_made_arrays) {
            std::vector<size_t> kept;
            for (size_t i = 0; i < jobs.size() && (count <= 0 || kept.size() < static_cast<size_t>(count)); i++) {
                JobView j{jobs, i};
                bool made_array = j["array"].is_object() && !j["array"].contains("to_make");
                if ((results.empty() || j.text("state", "") != "inactive" || results.count(j.text("result", ""))) &&
                    (!uid || j.number<uint32_t>("userid", ~0u) == *uid) && !(hide_made_arrays && made_array))
                    kept.push_back(i);
            }
            jobs.keep_only(kept);
        }
        if (json) {
            // A pending job's reserved start, when the scheduler has one.
            WaitingJobs waiting = waiting_jobs(client, jobs, true);
            nlohmann::json array = nlohmann::json::array();
            // "jobid": the id as text beside the number, which
            // JavaScript and other doubles-only readers would round.
            for (size_t i = 0; i < jobs.size(); i++) {
                nlohmann::json job = jobs.object(i);
                if (job.contains("id") && job["id"].is_number_unsigned())
                    job["jobid"] = format_jobid(job["id"].get<JobId>());
                if (auto t = estimate(JobView{jobs, i}, waiting))
                    job["t_estimate"] = *t;
                array.push_back(std::move(job));
            }
            fmt::print("{}\n", array.dump());
            exit_code = 0;
            return;
        }
        fmt::print("{}", table(client, jobs, layout, !no_header));
        exit_code = 0;
    });
}

std::string active_jobs_table(Client& client, bool all_users, size_t max) {
    nlohmann::json body{{"all_users", all_users}};
    if (max > 0)
        body["max"] = max;
    JobList jobs = list_jobs(client, body);
    return table(client, jobs, OutputFormat(kDefaultFormat, known_fields()), true);
}

}  // namespace banyan::cli
