// squeue: active jobs in Slurm's -o format (squeue(1)) or --json.
#include <fmt/format.h>

#include <set>

#include "cmd/slurm/commands.hpp"
#include "cmd/slurm/slurm_format.hpp"
#include "cmd/slurm/slurm_jobs.hpp"
#include "cmd/slurm_options.hpp"
#include "core/duration.hpp"
#include "core/slurm_names.hpp"

namespace banyan::cli::slurm {
namespace {

// squeue's short and long state names, any case, as -t takes them.
std::set<std::string> states_of(const std::string& list) {
    static const std::map<std::string, std::string> names = {
        {"PD", "PENDING"},      {"R", "RUNNING"},       {"CG", "COMPLETING"},     {"CD", "COMPLETED"},
        {"F", "FAILED"},        {"CA", "CANCELLED"},    {"TO", "TIMEOUT"},        {"OOM", "OUT_OF_MEMORY"},
        {"NF", "NODE_FAIL"},    {"PR", "PREEMPTED"}};
    std::set<std::string> out;
    for (std::string s : split_commas(list)) {
        for (char& c : s)
            c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        if (s == "ALL") {
            for (const auto& [shortname, name] : names)
                out.insert(name);
            continue;
        }
        if (auto it = names.find(s); it != names.end())
            s = it->second;
        bool known = false;
        for (const auto& [shortname, name] : names)
            known = known || name == s;
        if (!known)
            fail(fmt::format("Invalid job state specified: {}", s));
        out.insert(s);
    }
    return out;
}

std::string field_value(const SlurmJob& j, char type, double now) {
    double used = j.t_start > 0 ? (j.t_end > 0 ? j.t_end : now) - j.t_start : 0;
    switch (type) {
        case 'i':
            if (j.is_array && !j.array_left.empty())
                return fmt::format("{}_[{}]", j.id, j.array_left);
            return j.slurm_id();
        case 'A':
            return std::to_string(j.id);
        case 'F':
            return std::to_string(j.array_id.value_or(j.id));
        case 'K':
            return j.array_id ? std::to_string(j.index) : "N/A";
        case 'j':
            return j.name;
        case 'u':
            return user_name(j.userid);
        case 'U':
            return std::to_string(j.userid);
        case 't':
            return short_state(j.state);
        case 'T':
            return j.state;
        case 'M':
            return slurm_duration(used, true);
        case 'l':
            return j.time_limit > 0 ? slurm_duration(j.time_limit, true) : "UNLIMITED";
        case 'L':
            return j.time_limit > 0 ? slurm_duration(std::max(0.0, j.time_limit - used), true) : "UNLIMITED";
        case 'D':
            return std::to_string(std::max<uint64_t>(j.nnodes, 1));
        case 'C':
            return std::to_string(j.ncores > 0 ? j.ncores : j.ntasks);
        case 'R':
            return j.state == "PENDING" ? "(" + j.reason + ")" : j.nodelist;
        case 'r':
            return j.state == "PENDING" ? j.reason : "None";
        case 'N':
            return j.nodelist;
        case 'P':
            return j.partition.empty() ? "default" : j.partition;
        case 'a':
            return j.account.empty() ? "(null)" : j.account;
        case 'S':
            return slurm_time(j.t_start, "N/A");
        case 'V':
            return slurm_time(j.t_submit, "N/A");
        case 'e':
            return j.t_end > 0 ? slurm_time(j.t_end)
                   : j.t_start > 0 && j.time_limit > 0 ? slurm_time(j.t_start + j.time_limit)
                                                       : "N/A";
        case 'E':
            if (j.dependencies.empty())
                return "(null)";
            return fmt::format("{}", fmt::join(j.dependencies, ","));
        case 'Q':
            return fmt::format("{:.0f}", j.priority);
        case 'q':
            return "normal";
        default:
            return "";
    }
}

const std::map<char, std::string> kTitles = {
    {'i', "JOBID"},      {'A', "JOBID"},       {'F', "ARRAY_JOB_ID"}, {'K', "ARRAY_TASK_ID"}, {'j', "NAME"},
    {'u', "USER"},       {'U', "UID"},         {'t', "ST"},           {'T', "STATE"},         {'M', "TIME"},
    {'l', "TIME_LIMIT"}, {'L', "TIME_LEFT"},   {'D', "NODES"},        {'C', "CPUS"},          {'R', "NODELIST(REASON)"},
    {'r', "REASON"},     {'N', "NODELIST"},    {'P', "PARTITION"},    {'a', "ACCOUNT"},       {'S', "START_TIME"},
    {'V', "SUBMIT_TIME"}, {'e', "END_TIME"},   {'E', "DEPENDENCY"},   {'Q', "PRIORITY"},      {'q', "QOS"}};

nlohmann::json json_job(const SlurmJob& j) {
    nlohmann::json o{{"job_id", j.id},
                     {"name", j.name},
                     {"user_id", j.userid},
                     {"user_name", user_name(j.userid)},
                     {"job_state", j.state},
                     {"state_reason", j.state == "PENDING" ? j.reason : "None"},
                     {"partition", j.partition.empty() ? "default" : j.partition},
                     {"account", j.account},
                     {"nodes", j.nodelist},
                     {"node_count", std::max<uint64_t>(j.nnodes, 1)},
                     {"tasks", j.ntasks},
                     {"cpus", j.ncores > 0 ? j.ncores : j.ntasks},
                     {"submit_time", static_cast<int64_t>(j.t_submit)},
                     {"start_time", static_cast<int64_t>(j.t_start)},
                     {"end_time", static_cast<int64_t>(j.t_end)},
                     {"time_limit", static_cast<int64_t>(j.time_limit / 60)},
                     {"priority", static_cast<int64_t>(j.priority)}};
    if (j.array_id) {
        o["array_job_id"] = *j.array_id;
        o["array_task_id"] = j.index;
    }
    if (j.exit_code)
        o["exit_code"] = *j.exit_code;
    return o;
}

}  // namespace

int squeue(const Args& args) {
    CLI::App app("squeue: Slurm's view of Banyan's jobs", "squeue");
    app.set_help_flag("--help");
    bool no_header = false, long_form = false, me = false, json = false, all = false;
    std::string format, states, partition, name;
    std::vector<std::string> users, jobs;
    app.add_flag("-h,--noheader", no_header, "no header line");
    app.add_option("-o,--format", format, "Slurm's format: %[.][size]type");
    app.add_flag("-l,--long", long_form, "the long format");
    app.add_option("-u,--user", users, "these users' jobs (names or uids, comma-separated)");
    app.add_flag("--me", me, "your jobs");
    app.add_option("-j,--jobs", jobs, "these jobs (comma-separated)");
    app.add_option("-t,--states", states, "these states (PD,R,CG,... or all)");
    app.add_option("-p,--partition", partition, "jobs of these partitions (Banyan's queues)");
    app.add_option("-n,--name", name, "jobs of these names");
    app.add_flag("-a,--all", all, "every partition (all are shown)");
    app.add_flag("--json", json, "Slurm's JSON");
    if (!parse_or_help(app, args))
        return 0;
    if (format.empty())
        // Slurm's, with the id 20 wide: Banyan's ids have 19 digits.
        format = long_form ? "%.20i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R" : "%.20i %.9P %.8j %.8u %.2t %.10M %.6D %R";
    SlurmFormat layout(format, "iAFKjuUtTMlLDCRrNPaSVeEQq");
    Client client = connect_to_instance();
    // Slurm shows every user's jobs; a user who may not list others' (the
    // owner may) sees their own, as under Slurm's PrivateData=jobs.
    std::vector<SlurmJob> found;
    try {
        found = listed_jobs(client, !me);
    } catch (const Failure&) {
        found = listed_jobs(client, false);
    }
    std::set<std::string> wanted = states.empty() ? std::set<std::string>{"PENDING", "RUNNING", "COMPLETING"}
                                                  : states_of(states);
    std::set<uint32_t> uids;
    for (const auto& u : id_list(users))
        uids.insert(uid_of_user(u, "-u"));
    JobSelection ids(id_list(jobs));
    auto names = id_list({name});
    auto partitions = id_list({partition});
    double now = wall_now();
    std::string out;
    nlohmann::json rows = nlohmann::json::array();
    if (!no_header && !json)
        out += layout.header(kTitles) + "\n";
    for (const auto& j : found) {
        // Named jobs show in any state, unless -t says which.
        if (!wanted.count(j.state) && (ids.empty() || !states.empty()))
            continue;
        if (!ids.empty() && !ids.contains(j))
            continue;
        if (!uids.empty() && !uids.count(j.userid))
            continue;
        if (!names.empty() && std::find(names.begin(), names.end(), j.name) == names.end())
            continue;
        std::string p = j.partition.empty() ? "default" : j.partition;
        if (!partitions.empty() && std::find(partitions.begin(), partitions.end(), p) == partitions.end())
            continue;
        // An array shows while indexes remain to be made; its elements
        // show on their own lines.
        if (j.is_array && j.array_left.empty())
            continue;
        if (json)
            rows.push_back(json_job(j));
        else
            out += layout.render([&](char type) { return field_value(j, type, now); }) + "\n";
    }
    if (json)
        out = nlohmann::json{{"meta", {{"plugin", {{"type", "openapi/v0.0.38"}}}}}, {"errors", nlohmann::json::array()},
                             {"jobs", rows}}
                  .dump(2) +
              "\n";
    fmt::print("{}", out);
    return 0;
}

}  // namespace banyan::cli::slurm
