// scontrol: show job|node|partition|config|hostnames, hold, release,
// requeue, update (scontrol(1)), over the requests banyan job sends.
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <fmt/format.h>

#include "cmd/slurm/commands.hpp"
#include "cmd/slurm/slurm_jobs.hpp"
#include "cmd/slurm_options.hpp"
#include "core/duration.hpp"
#include "core/hostlist.hpp"
#include "core/slurm_names.hpp"

namespace banyan::cli::slurm {
namespace {

std::string group_of(uint32_t uid) {
    const passwd* pw = getpwuid(uid);
    gid_t gid = pw ? pw->pw_gid : uid;
    const group* gr = getgrgid(gid);
    return fmt::format("{}({})", gr ? gr->gr_name : std::to_string(gid), gid);
}

// An output file's template as the shell will name it, for StdOut=.
std::string output_path(std::string path, const SlurmJob& j, const std::string& cwd) {
    if (path.empty())
        return "(null)";
    path = replace_all(std::move(path), "{{id}}", format_jobid(j.id));
    path = replace_all(std::move(path), "{{id.dec}}", std::to_string(j.id));
    path = replace_all(std::move(path), "{{name}}", j.name);
    path = replace_all(std::move(path), "{{user}}", user_name(j.userid));
    path = replace_all(std::move(path), "{{array_id.dec}}", std::to_string(j.array_id.value_or(j.id)));
    path = replace_all(std::move(path), "{{array_id}}", format_jobid(j.array_id.value_or(j.id)));
    path = replace_all(std::move(path), "{{array_index}}", j.array_id ? std::to_string(j.index) : "4294967294");
    path = replace_all(std::move(path), "{{taskid}}", "0");
    return path.starts_with("/") || cwd.empty() ? path : cwd + "/" + path;
}

std::string show_job(Client& client, const SlurmJob& j) {
    auto info = must(client.rpc("job-manager.info", {{"id", j.id}}, 0));
    const auto& system = json_object_at(info, {"jobspec", "attributes", "system"});
    std::string cwd = json_field<std::string>(system, "cwd", "", "jobspec").value_or("");
    const auto& output = json_object_at(system, {"shell", "options", "output"});
    std::string out_path = json_field<std::string>(json_object_at(output, {"stdout"}), "path", "", "output")
                               .value_or("");
    std::string err_path = json_field<std::string>(json_object_at(output, {"stderr"}), "path", "", "output")
                               .value_or(out_path);
    bool batch = system.contains("batch");
    std::string command;
    if (const auto& tasks = json_array_at(json_object_at(info, {"jobspec"}), "tasks"); !tasks.empty()) {
        const auto& words = json_array_at(tasks[0], "command");
        if (!words.empty() && words[0].is_string())
            command = batch ? "(batch script)" : words[0].get<std::string>();
    }
    double now = wall_now();
    double run = j.t_start > 0 ? (j.t_end > 0 ? j.t_end : now) - j.t_start : 0;
    double end = j.t_end > 0 ? j.t_end : j.t_start > 0 && j.time_limit > 0 ? j.t_start + j.time_limit : 0;
    uint64_t cpus = j.ncores > 0 ? j.ncores : j.ntasks;
    std::string id_line = fmt::format("JobId={}", j.id);
    if (j.array_id)
        id_line += fmt::format(" ArrayJobId={} ArrayTaskId={}", *j.array_id, j.index);
    std::string deps = j.dependencies.empty() ? "(null)" : fmt::format("{}", fmt::join(j.dependencies, ","));
    std::string out;
    out += fmt::format("{} JobName={}\n", id_line, j.name);
    out += fmt::format("   UserId={}({}) GroupId={} MCS_label=N/A\n", user_name(j.userid), j.userid, group_of(j.userid));
    out += fmt::format("   Priority={:.0f} Nice=0 Account={} QOS=normal\n", j.priority,
                       j.account.empty() ? "(null)" : j.account);
    out += fmt::format("   JobState={} Reason={} Dependency={}\n", j.state, j.state == "PENDING" ? j.reason : "None",
                       deps);
    out += fmt::format("   Requeue=0 Restarts=0 BatchFlag={} Reboot=0 ExitCode={}:{}\n", batch ? 1 : 0,
                       j.exit_code.value_or(0), j.exit_signal);
    out += fmt::format("   RunTime={} TimeLimit={} TimeMin=N/A\n", slurm_duration(run), slurm_limit(j.time_limit));
    out += fmt::format("   SubmitTime={} EligibleTime={}\n", slurm_time(j.t_submit), slurm_time(j.t_submit));
    out += fmt::format("   StartTime={} EndTime={} Deadline=N/A\n", slurm_time(j.t_start), slurm_time(end));
    out += fmt::format("   Partition={} AllocNode:Sid=(null):0\n", j.partition.empty() ? "default" : j.partition);
    out += fmt::format("   NodeList={}\n", j.nodelist.empty() ? "(null)" : j.nodelist);
    out += fmt::format("   NumNodes={} NumCPUs={} NumTasks={} CPUs/Task={}\n", std::max<uint64_t>(j.nnodes, 1), cpus,
                       j.ntasks, j.ntasks > 0 && cpus >= j.ntasks ? cpus / j.ntasks : 1);
    out += fmt::format("   Command={}\n", command.empty() ? "(null)" : command);
    out += fmt::format("   WorkDir={}\n", cwd);
    out += fmt::format("   StdErr={}\n", output_path(err_path, j, cwd));
    out += "   StdIn=/dev/null\n";
    out += fmt::format("   StdOut={}\n", output_path(out_path, j, cwd));
    return out;
}

int show(const Args& words) {
    if (words.empty())
        fail("show: what? (job, node, partition, config, hostnames)");
    std::string what = words[0];
    std::string name = words.size() > 1 ? words[1] : "";
    if (what == "job" || what == "jobs" || what == "jobid") {
        Client client = connect_to_instance();
        auto jobs = listed_jobs(client, false);
        if (!name.empty()) {
            nlohmann::json request = slurm_job_request(name);
            JobId id = request["id"].get<JobId>();
            if (request.contains("index"))
                id = job_id_argument(client, name.find('_') != std::string::npos
                                                 ? name.substr(0, name.find('_')) + "[" +
                                                       name.substr(name.find('_') + 1) + "]"
                                                 : name);
            std::erase_if(jobs, [id](const SlurmJob& j) { return j.id != id; });
            if (jobs.empty())
                fail("slurm_load_jobs error: Invalid job id specified");
        }
        std::string out;
        for (const auto& j : jobs)
            if (!j.is_array || !j.array_left.empty())
                out += show_job(client, j) + "\n";
        if (out.empty())
            out = "No jobs in the system\n";
        fmt::print("{}", out);
        return 0;
    }
    if (what == "node" || what == "nodes") {
        Client client = connect_to_instance();
        SlurmNodes all = load_nodes(client);
        std::string out;
        for (const auto& n : all.nodes) {
            if (!name.empty() && n.hostname != name)
                continue;
            out += fmt::format("NodeName={} Arch=(null) CoresPerSocket=1\n", n.hostname);
            out += fmt::format("   CPUAlloc={} CPUEfctv={} CPUTot={} CPULoad=0.00\n", n.cores_used, n.cores, n.cores);
            out += fmt::format("   Gres={}\n", n.gpus > 0 ? fmt::format("gpu:{}", n.gpus) : "(null)");
            out += fmt::format("   NodeAddr={} NodeHostName={}\n", n.hostname, n.hostname);
            out += fmt::format("   State={} ThreadsPerCore=1\n", n.state);
            out += fmt::format("   Partitions={}\n", all.partitions.front().name);
            if (!n.reason.empty())
                out += fmt::format("   Reason={}\n", n.reason);
            out += "\n";
        }
        if (out.empty())
            fail(fmt::format("Node {} not found", name));
        fmt::print("{}", out);
        return 0;
    }
    if (what == "partition" || what == "partitions") {
        Client client = connect_to_instance();
        SlurmNodes all = load_nodes(client);
        HostList hosts;
        uint64_t cpus = 0;
        for (const auto& n : all.nodes) {
            hosts.append(n.hostname);
            cpus += n.cores;
        }
        std::string out;
        for (const auto& p : all.partitions) {
            if (!name.empty() && p.name != name)
                continue;
            out += fmt::format("PartitionName={}\n", p.name);
            out += fmt::format("   Default={} State={}\n", p.is_default ? "YES" : "NO", p.enabled ? "UP" : "DOWN");
            out += fmt::format("   MaxTime={}\n", slurm_limit(p.max_time));
            out += fmt::format("   Nodes={}\n", hosts.format());
            out += fmt::format("   TotalCPUs={} TotalNodes={}\n\n", cpus, all.nodes.size());
        }
        if (out.empty())
            fail(fmt::format("Partition {} not found", name));
        fmt::print("{}", out);
        return 0;
    }
    if (what == "config") {
        Client client = connect_to_instance();
        auto info = must(client.rpc("broker.info", nlohmann::json::object(), 0));
        std::string version = json_field<std::string>(info, "version", "", "broker.info").value_or("");
        fmt::print("Configuration data as of {}\n", format_moment(wall_now()));
        auto kv = [](const std::string& key, const std::string& value) { fmt::print("{:<23} = {}\n", key, value); };
        kv("ClusterName", "banyan");
        kv("SchedulerType", "banyan");
        kv("SelectType", "banyan/graph");
        kv("SLURM_VERSION", "22.05 (banyan " + version + ")");
        kv("NodeCount", std::to_string(json_field<uint64_t>(info, "size", 0, "broker.info").value_or(0)));
        kv("SlurmctldHost[0]", json_field<std::string>(info, "hostname", "", "broker.info").value_or(""));
        return 0;
    }
    if (what == "hostnames" || what == "hostname") {
        const char* env = std::getenv("SLURM_JOB_NODELIST");
        std::string list = !name.empty() ? name : env ? env : "";
        auto hosts = HostList::parse(list);
        if (!hosts)
            fail(fmt::format("Invalid hostlist: {}", list));
        for (const auto& h : *hosts)
            fmt::print("{}\n", h);
        return 0;
    }
    if (what == "hostlist") {
        HostList hosts;
        for (const auto& h : split_commas(name))
            hosts.append(h);
        fmt::print("{}\n", hosts.format());
        return 0;
    }
    fail(fmt::format("show {}: not supported (job, node, partition, config, hostnames, hostlist are)", what));
}

nlohmann::json job_urgency(const std::string& id, int urgency) {
    nlohmann::json request = slurm_job_request(id);
    request["urgency"] = urgency;
    return request;
}

// update JobId=ID TimeLimit=T JobName=N Partition=P: one request, all of
// it or none.
int update(Client& client, const Args& words) {
    nlohmann::json body;
    for (const auto& w : words) {
        auto eq = w.find('=');
        if (eq == std::string::npos)
            fail(fmt::format("update {}: expected KEY=VALUE", w));
        std::string key = w.substr(0, eq), value = w.substr(eq + 1);
        std::string lower;
        for (char c : key)
            lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (lower == "jobid") {
            nlohmann::json target = slurm_job_request(value);
            for (auto& [k, v] : target.items())
                body[k] = v;
        } else if (lower == "timelimit") {
            auto seconds = slurm_minutes_time(value);
            if (!seconds)
                fail(fmt::format("TimeLimit={}: {}", value, seconds.error().message));
            body["duration"] = *seconds;
        } else if (lower == "jobname" || lower == "name") {
            body["name"] = value;
        } else if (lower == "partition") {
            body["queue"] = value;
        } else {
            fail(fmt::format("update {}: not supported (JobId, TimeLimit, JobName, Partition are)", key));
        }
    }
    if (!body.contains("id"))
        fail("update: give JobId=ID");
    must(client.rpc("job-manager.update", body, 0));
    return 0;
}

}  // namespace

int scontrol(const Args& args) {
    Args words;
    for (const auto& a : args) {
        if (a == "-d" || a == "-dd" || a == "--details" || a == "-o" || a == "--oneliner")
            continue;  // more detail, or one line: Banyan shows the same fields
        if (a == "--help" || a == "-h") {
            fmt::print("Usage: scontrol show job|node|partition|config|hostnames [NAME] | hold|release|requeue ID... "
                       "| update JobId=ID KEY=VALUE...\nSee banyan-slurm(7).\n");
            return 0;
        }
        words.push_back(a);
    }
    if (words.empty())
        fail("give a command: show, hold, release, requeue, update (banyan-slurm(7))");
    std::string command = words[0];
    Args rest(words.begin() + 1, words.end());
    if (command == "show")
        return show(rest);
    if (command == "hold" || command == "release" || command == "uhold" || command == "requeue") {
        auto ids = id_list(rest);
        if (ids.empty())
            fail(fmt::format("{}: give job ids", command));
        Client client = connect_to_instance();
        for (const auto& id : ids) {
            if (command == "requeue")
                must(client.rpc("job-manager.requeue", slurm_job_request(id), 0));
            else
                must(client.rpc("job-manager.urgency", job_urgency(id, command == "release" ? 16 : 0), 0));
        }
        return 0;
    }
    if (command == "update") {
        Client client = connect_to_instance();
        return update(client, rest);
    }
    fail(fmt::format("{}: not supported (show, hold, release, requeue, update are; banyan-slurm(7))", command));
}

}  // namespace banyan::cli::slurm
