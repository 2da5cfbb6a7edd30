// scancel: cancel jobs (or signal them, -s) by id or by filter, as
// scancel(1); the requests banyan cancel and banyan job kill send.
#include <unistd.h>

#include <set>

#include <fmt/format.h>

#include "cmd/slurm/commands.hpp"
#include "cmd/slurm/slurm_jobs.hpp"

namespace banyan::cli::slurm {

int scancel(const Args& args) {
    CLI::App app("scancel: cancel Banyan jobs as Slurm's scancel does", "scancel");
    std::vector<std::string> ids;
    std::string signal, user, name, state, partition, account;
    bool me = false, quiet = false, batch = false, full = false;
    app.add_option("job_id", ids, "job ids: N, A_I (an element), or Banyan's");
    app.add_option("-s,--signal", signal, "send this signal instead of cancelling");
    app.add_option("-u,--user", user, "that user's jobs");
    app.add_flag("--me", me, "your jobs");
    app.add_option("-n,--name,--jobname", name, "jobs of this name");
    app.add_option("-t,--state", state, "jobs in this state (PENDING, RUNNING)");
    app.add_option("-p,--partition", partition, "jobs of this partition (Banyan's queue)");
    app.add_option("-A,--account", account, "jobs of this account (Banyan's bank)");
    app.add_flag("-Q,--quiet", quiet, "no error for a job already ended");
    app.add_flag("-b,--batch", batch, "accepted (with -s): a batch job's instance passes USR1 and USR2 on as its --signal-to says");
    app.add_flag("-f,--full", full, "accepted (with -s): as -b");
    if (!parse_or_help(app, args))
        return 0;
    ids = id_list(ids);
    bool filtered = !user.empty() || me || !name.empty() || !state.empty() || !partition.empty() || !account.empty();
    if (ids.empty() && !filtered)
        fail("No job identification provided");
    Client client = connect_to_instance();
    std::vector<nlohmann::json> targets;
    if (filtered) {
        // The filters choose among the active jobs (and among ids, if given).
        JobSelection named(ids);
        uint32_t uid = user.empty() ? 0 : uid_of_user(user, "-u");
        std::string wanted_state = state == "PD" ? "PENDING" : state == "R" ? "RUNNING" : state;
        std::vector<SlurmJob> chosen;
        std::set<JobId> arrays;
        for (auto& j : listed_jobs(client, !user.empty() && uid != getuid())) {
            if (!j.active() || (!named.empty() && !named.contains(j)) || (!user.empty() && j.userid != uid) ||
                (!name.empty() && j.name != name) || (!wanted_state.empty() && j.state != wanted_state) ||
                (!partition.empty() && j.partition != partition) || (!account.empty() && j.account != account))
                continue;
            if (j.is_array)
                arrays.insert(j.id);
            chosen.push_back(std::move(j));
        }
        // An element ends with its array when the array is chosen too.
        for (const auto& j : chosen)
            if (!j.array_id || !arrays.count(*j.array_id))
                targets.push_back({{"id", j.id}});
    } else {
        for (const auto& id : ids)
            targets.push_back(slurm_job_request(id));
    }
    const char* method = signal.empty() ? "job-manager.cancel" : "job-manager.kill";
    int sig = signal.empty() ? 0 : signal_number(signal, "-s");
    int status = 0;
    for (auto& target : targets) {
        if (sig)
            target["signal"] = sig;
        if (auto r = client.rpc(method, target, 0); !r) {
            // As scancel: an error for each job, and the others go on; a
            // job already ended is said so, and is no failure.
            bool ended = r.error().message.find("inactive") != std::string::npos;
            if (ended) {
                if (!quiet)
                    fmt::print(stderr, "scancel: error: Kill job error on job id {}: Job/step already completing or "
                                       "completed\n",
                               target.contains("index") ? fmt::format("{}_{}", target["id"].get<JobId>(),
                                                                      target["index"].get<uint32_t>())
                                                        : std::to_string(target["id"].get<JobId>()));
                continue;
            }
            fmt::print(stderr, "scancel: error: Kill job error on job id {}: {}\n",
                       target.contains("index")
                           ? fmt::format("{}_{}", target["id"].get<JobId>(), target["index"].get<uint32_t>())
                           : std::to_string(target["id"].get<JobId>()),
                       r.error().message);
            status = 1;
        }
    }
    return status;
}

}  // namespace banyan::cli::slurm
