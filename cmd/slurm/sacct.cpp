// sacct: jobs, active and finished, in Slurm's --format fields (sacct(1)):
// the job manager's rows for the jobs it still holds, the accounting
// store's records for the rest.
#include <unistd.h>

#include <cctype>
#include <map>
#include <set>

#include <fmt/format.h>

#include "cmd/slurm/commands.hpp"
#include "cmd/slurm/slurm_jobs.hpp"
#include "cmd/slurm_options.hpp"
#include "core/duration.hpp"
#include "core/slurm_names.hpp"

namespace banyan::cli::slurm {
namespace {

struct Column {
    std::string name;  // as Slurm spells it in the header
    size_t width;
    bool right;
};

// The fields sacct can show, with Slurm's default width (JobID's 20, not
// 12: Banyan's ids have 19 digits); JobID-like ones are left-justified,
// as sacct prints them.
const std::map<std::string, Column>& known_columns() {
    static const std::map<std::string, Column> columns = {
        {"jobid", {"JobID", 20, false}},        {"jobidraw", {"JobIDRaw", 20, false}},
        {"jobname", {"JobName", 10, true}},     {"state", {"State", 10, true}},
        {"exitcode", {"ExitCode", 8, true}},    {"elapsed", {"Elapsed", 10, true}},
        {"elapsedraw", {"ElapsedRaw", 10, true}}, {"start", {"Start", 19, true}},
        {"end", {"End", 19, true}},             {"submit", {"Submit", 19, true}},
        {"eligible", {"Eligible", 19, true}},   {"nodelist", {"NodeList", 15, true}},
        {"alloccpus", {"AllocCPUS", 10, true}}, {"ncpus", {"NCPUS", 10, true}},
        {"nnodes", {"NNodes", 8, true}},        {"allocnodes", {"AllocNodes", 10, true}},
        {"maxrss", {"MaxRSS", 10, true}},       {"account", {"Account", 10, true}},
        {"partition", {"Partition", 10, true}}, {"user", {"User", 9, true}},
        {"uid", {"UID", 6, true}},              {"timelimit", {"Timelimit", 10, true}},
        {"timelimitraw", {"TimelimitRaw", 12, true}}, {"cputime", {"CPUTime", 10, true}},
        {"cputimeraw", {"CPUTimeRAW", 10, true}}, {"totalcpu", {"TotalCPU", 10, true}},
        {"ntasks", {"NTasks", 8, true}},        {"qos", {"QOS", 10, true}},
        {"reason", {"Reason", 20, true}},       {"cluster", {"Cluster", 10, true}},
    };
    return columns;
}

struct Field {
    std::string key;  // lower case
    Column column;
};

// --format=Name[%[-]N],...: fails naming an unknown field.
std::vector<Field> fields_of(const std::string& format) {
    std::vector<Field> out;
    for (const auto& item : split_commas(format)) {
        if (item.empty())
            continue;
        auto percent = item.find('%');
        std::string key;
        for (char c : item.substr(0, percent))
            key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        auto it = known_columns().find(key);
        if (it == known_columns().end())
            fail(fmt::format("Invalid field requested: \"{}\" (banyan-slurm(7) lists the fields)", item));
        Field f{key, it->second};
        if (percent != std::string::npos) {
            std::string width = item.substr(percent + 1);
            f.column.right = !width.starts_with("-");
            if (!f.column.right)
                width.erase(0, 1);
            if (width.empty() || width.size() > 4 || width.find_first_not_of("0123456789") != std::string::npos)
                fail(fmt::format("Invalid field width: \"{}\"", item));
            f.column.width = std::stoul(width);
        }
        out.push_back(std::move(f));
    }
    return out;
}

// Bytes as sacct prints memory: K, M, G with no fraction past 10.
std::string memory(uint64_t bytes) {
    if (bytes == 0)
        return "";
    double v = static_cast<double>(bytes) / 1024;
    const char* units[] = {"K", "M", "G", "T"};
    size_t u = 0;
    while (v >= 1024 && u + 1 < std::size(units)) {
        v /= 1024;
        u++;
    }
    return fmt::format("{:.0f}{}", v, units[u]);
}

std::string value(const SlurmJob& j, const std::string& key, double now) {
    double elapsed = j.t_start > 0 ? (j.t_end > 0 ? j.t_end : now) - j.t_start : 0;
    uint64_t cpus = j.ncores > 0 ? j.ncores : j.ntasks;
    if (key == "jobid")
        return j.slurm_id();
    if (key == "jobidraw")
        return std::to_string(j.id);
    if (key == "jobname")
        return j.name;
    if (key == "state")
        return j.state;
    if (key == "exitcode")
        return fmt::format("{}:{}", j.exit_code.value_or(0), j.exit_signal);
    if (key == "elapsed")
        return slurm_duration(elapsed);
    if (key == "elapsedraw")
        return fmt::format("{:.0f}", elapsed);
    if (key == "start")
        return slurm_time(j.t_start);
    if (key == "end")
        return slurm_time(j.t_end);
    if (key == "submit" || key == "eligible")
        return slurm_time(j.t_submit);
    if (key == "nodelist")
        return j.nodelist.empty() ? "None assigned" : j.nodelist;
    if (key == "alloccpus" || key == "ncpus")
        return std::to_string(j.state == "PENDING" ? 0 : cpus);
    if (key == "nnodes" || key == "allocnodes")
        return std::to_string(j.nnodes);
    if (key == "ntasks")
        return std::to_string(j.ntasks);
    if (key == "maxrss")
        return memory(j.maxrss);
    if (key == "account")
        return j.account;
    if (key == "partition")
        return j.partition.empty() ? "default" : j.partition;
    if (key == "user")
        return user_name(j.userid);
    if (key == "uid")
        return std::to_string(j.userid);
    if (key == "timelimit")
        return slurm_limit(j.time_limit);
    if (key == "timelimitraw")
        return j.time_limit > 0 ? fmt::format("{:.0f}", j.time_limit / 60) : "UNLIMITED";
    if (key == "cputime")
        return slurm_duration(elapsed * static_cast<double>(cpus));
    if (key == "cputimeraw")
        return fmt::format("{:.0f}", elapsed * static_cast<double>(cpus));
    if (key == "totalcpu")
        return slurm_duration(j.cpu);
    if (key == "qos")
        return "normal";
    if (key == "reason")
        return j.state == "PENDING" ? j.reason : "None";
    if (key == "cluster")
        return "banyan";
    return "";
}

std::set<std::string> states_of(const std::string& list) {
    static const std::map<std::string, std::string> names = {
        {"PD", "PENDING"},  {"R", "RUNNING"},    {"CG", "COMPLETING"}, {"CD", "COMPLETED"},    {"F", "FAILED"},
        {"CA", "CANCELLED"}, {"TO", "TIMEOUT"}, {"OOM", "OUT_OF_MEMORY"}, {"NF", "NODE_FAIL"}, {"PR", "PREEMPTED"}};
    std::set<std::string> out;
    for (std::string s : split_commas(list)) {
        for (char& c : s)
            c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        if (auto it = names.find(s); it != names.end())
            s = it->second;
        bool known = false;
        for (const auto& [shortname, name] : names)
            known = known || name == s;
        if (!known)
            fail(fmt::format("Invalid state specified: {}", s));
        out.insert(s);
    }
    return out;
}

}  // namespace

int sacct(const Args& args) {
    CLI::App app("sacct: Banyan's jobs as Slurm's sacct shows them", "sacct");
    bool no_header = false, parsable = false, parsable2 = false, all_users = false, allocations = false,
         brief = false;
    std::string format, delimiter = "|", starttime, endtime, states, names;
    std::vector<std::string> jobs, users;
    app.add_flag("-n,--noheader", no_header, "no header");
    app.add_flag("-p,--parsable", parsable, "'|' after each field");
    app.add_flag("-P,--parsable2", parsable2, "'|' between fields");
    app.add_option("--delimiter", delimiter, "the separator of -p and -P");
    app.add_option("-o,--format", format, "fields, comma-separated, each NAME[%[-]WIDTH]");
    app.add_flag("-b,--brief", brief, "JobID, State and ExitCode");
    app.add_option("-j,--jobs", jobs, "these jobs (comma-separated)");
    app.add_option("-u,--user,--uid", users, "these users' jobs");
    app.add_flag("-a,--allusers", all_users, "every user's jobs");
    app.add_flag("-X,--allocations", allocations, "jobs only, no steps (Banyan's jobs have none to show)");
    app.add_option("-S,--starttime", starttime, "jobs after this time (default: midnight; with -j, any)");
    app.add_option("-E,--endtime", endtime, "jobs before this time (default: now)");
    app.add_option("-s,--state", states, "jobs in these states");
    app.add_option("--name", names, "jobs of these names");
    if (!parse_or_help(app, args))
        return 0;
    if (format.empty()) {
        const char* env = std::getenv("SACCT_FORMAT");
        format = brief ? "JobID,State,ExitCode"
                 : env ? env
                       : "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode";
    }
    std::vector<Field> fields = fields_of(format);
    double now = wall_now();
    jobs = id_list(jobs);
    // Slurm's default window: since midnight, or all time for named jobs.
    double since = 0, until = 0;
    if (!starttime.empty())
        since = moment_option(starttime, "-S", now);
    else if (jobs.empty()) {
        time_t t = static_cast<time_t>(now);
        tm local{};
        localtime_r(&t, &local);
        local.tm_hour = local.tm_min = local.tm_sec = 0;
        since = static_cast<double>(mktime(&local));
    }
    if (!endtime.empty())
        until = moment_option(endtime, "-E", now);
    std::set<std::string> wanted = states.empty() ? std::set<std::string>{} : states_of(states);
    std::set<uint32_t> uids;
    for (const auto& u : id_list(users))
        uids.insert(uid_of_user(u, "-u"));
    // Others' jobs only when asked for (the instance owner may); -a from
    // another user shows their own, as squeue does.
    bool everyone = all_users;
    for (uint32_t uid : uids)
        everyone = everyone || uid != getuid();
    auto name_list = id_list({names});

    Client client = connect_to_instance();
    std::vector<SlurmJob> found;
    std::set<JobId> seen;
    std::vector<SlurmJob> listed;
    try {
        listed = listed_jobs(client, everyone);
    } catch (const Failure&) {
        if (!all_users || !uids.empty())
            throw;
        everyone = false;
        listed = listed_jobs(client, false);
    }
    for (auto& j : listed) {
        seen.insert(j.id);
        found.push_back(std::move(j));
    }
    if (jobs.empty()) {
        nlohmann::json query{{"count", 100000}};
        if (since > 0)
            query["since"] = since;
        if (until > 0)
            query["until"] = until;
        if (everyone)
            query["all"] = true;
        for (auto& j : recorded_jobs(client, query))
            if (seen.insert(j.id).second)
                found.push_back(std::move(j));
    } else {
        for (JobId id : JobSelection(jobs).ids()) {
            if (seen.count(id))
                continue;
            nlohmann::json query{{"id", id}, {"count", 1}};
            if (everyone)
                query["all"] = true;
            for (auto& j : recorded_jobs(client, query))
                if (seen.insert(j.id).second)
                    found.push_back(std::move(j));
        }
    }
    JobSelection named(jobs);
    std::sort(found.begin(), found.end(), [](const SlurmJob& a, const SlurmJob& b) { return a.id < b.id; });

    std::string out;
    bool parse_mode = parsable || parsable2;
    auto line = [&](const std::function<std::string(const Field&)>& cell) {
        std::string text;
        for (size_t i = 0; i < fields.size(); i++) {
            if (parse_mode) {
                text += cell(fields[i]);
                if (parsable || i + 1 < fields.size())
                    text += delimiter;
            } else {
                text += pad(cell(fields[i]), fields[i].column.width, fields[i].column.right,
                            !fields[i].key.starts_with("jobid")) +
                        " ";
            }
        }
        return text + "\n";
    };
    if (!no_header) {
        out += line([](const Field& f) { return f.column.name; });
        if (!parse_mode)
            out += line([](const Field& f) { return std::string(f.column.width, '-'); });
    }
    for (const auto& j : found) {
        if (!named.empty() && !named.contains(j))
            continue;
        if (j.is_array)  // its elements are the jobs that ran
            continue;
        if (!uids.empty() && !uids.count(j.userid))
            continue;
        if (!wanted.empty() && !wanted.count(j.state))
            continue;
        if (!name_list.empty() && std::find(name_list.begin(), name_list.end(), j.name) == name_list.end())
            continue;
        if (named.empty() && !j.active() && ((since > 0 && j.t_end < since) || (until > 0 && j.t_end >= until)))
            continue;
        out += line([&](const Field& f) { return value(j, f.key, now); });
    }
    fmt::print("{}", out);
    return 0;
}

}  // namespace banyan::cli::slurm
