// The exec service across failures (doc/spec/shell.md §8): adopting the
// shells a dead broker left, exec.reattach for a job manager that started
// again, exec.reconcile for a rank that comes back, and what a rank cut
// off from its parent does (exec.cut-off).
#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <set>
#include <utility>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "broker/exec/local_job.hpp"
#include "core/duration.hpp"
#include "core/idset.hpp"
#include "core/json_field.hpp"
#include "core/json_parse.hpp"
#include "core/log.hpp"
#include "core/text_file.hpp"
#include "core/unix_socket.hpp"

namespace banyan {

// Each socket <rundir>/jobs/<id>/reattach.sock is a shell that outlived
// its broker (doc/spec/shell.md §8): connected, it says hello, sends what
// it kept, and goes on as if started here; its end of file is its exit.
void ExecService::adopt_orphaned_shells() {
    std::string dir = broker_.bootstrap().rundir + "/jobs";
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        const std::string name = entry.path().filename().string();
        if (name == "ended" || !entry.is_directory(ec))
            continue;
        auto id = parse_decimal(name, UINT64_MAX, "job id");
        if (!id) {
            log::warning("exec", "{}: {}; ignored", entry.path().string(), id.error().message);
            continue;
        }
        std::string socket = entry.path().string() + "/reattach.sock";
        if (!jobs_.count(*id) && access(socket.c_str(), F_OK) == 0)
            adopt_shell(socket, *id);
    }
}

bool ExecService::adopt_shell(const std::string& path, JobId id) {
    // Not waiting: a shell that hangs with its backlog full must not stop
    // this broker's loop (it is tried again at the next reattach/reconcile).
    auto fd = connect_unix(path, Wait::no);
    if (!fd) {
        if (fd.error().code == EAGAIN) {
            log::warning("exec", "{}: busy; tried again later", path);
            return false;
        }
        if (fd.error().code != ENOENT) {
            // A shell that gave up (or crashed) left its socket behind.
            log::warning("exec", "{}: {}; removed", path, fd.error().message);
            unlink(path.c_str());
        }
        return false;
    }
    ucred peer{};
    socklen_t len = sizeof peer;
    // Only this broker (or banyan-imp, for the job's user) makes the
    // directories in jobs/: the shell must be its directory's owner.
    struct stat dir {};
    std::string job_dir = path.substr(0, path.rfind('/'));
    if (getsockopt(fd->get(), SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || stat(job_dir.c_str(), &dir) != 0 ||
        peer.uid != dir.st_uid) {
        log::warning("exec", "{}: not a shell of the job's user; ignored", path);
        return false;
    }
    UniqueFd write_fd(fcntl(fd->get(), F_DUPFD_CLOEXEC, 0));
    if (!write_fd) {
        log::error("exec", "{}: dup: {}", path, std::strerror(errno));
        return false;
    }
    auto job = std::make_unique<LocalJob>();
    job->adopted_pid = peer.pid;
    job->tmpdir = job_dir;  // removed with the job, as a shell's started here
    adopt_cgroups(id, *job, peer.pid);
    job->channel = std::make_unique<LineChannel>(
        broker_.reactor(), fd->release(), write_fd.release(),
        [this, id](Result<nlohmann::json> m) { on_shell_message(id, std::move(m)); },
        [this, id] {
            // Not here: the channel is inside its own callback.
            broker_.reactor().post([this, id] { on_adopted_shell_gone(id); });
        });
    jobs_.emplace(id, std::move(job));
    log::info("exec", "{}: re-attached its shell (pid {})", format_jobid(id), peer.pid);
    return true;
}

// Found in /proc/PID/cgroup and taken only where named as this rank's for
// this job (is_job_cgroup_name) right under this broker's own cgroup:
// the job's end then kills and removes them as for a shell started here
// (left, each broker restart under running jobs left a cgroup a job on the
// host), and an OOM kill in them is reported.
void ExecService::adopt_cgroups(JobId id, LocalJob& job, pid_t pid) {
    auto mounts = read_text_file("/proc/self/mounts");
    auto of_shell = read_text_file(fmt::format("/proc/{}/cgroup", pid));
    if (!mounts || !of_shell)
        return;
    std::string jobid = format_jobid(id);
    auto take = [&](const std::optional<std::string>& dir, const std::optional<std::string>& parent,
                    std::optional<JobCgroup>& into) {
        if (!dir || !parent || !dir->starts_with(*parent + "/") ||
            !is_job_cgroup_name(std::string_view(*dir).substr(parent->size() + 1), broker_.bootstrap().rank, jobid))
            return;
        if (auto cgroup = JobCgroup::open_existing(*dir))
            into.emplace(std::move(*cgroup));
        else
            log::warning("exec", "{}: its shell's {}; left in place", format_jobid(id), cgroup.error().message);
    };
    take(own_unified_cgroup(*mounts, *of_shell), cgroup_parent_, job.cgroup);
    take(own_v1_memory_cgroup(*mounts, *of_shell), memory_parent_v1_, job.memory_cgroup);
    const JobCgroup* limited = job.memory_cgroup ? &*job.memory_cgroup : job.cgroup ? &*job.cgroup : nullptr;
    if (auto bytes = limited ? limited->memory_limit() : std::nullopt) {
        job.memory_limit = *bytes;
        job.memory_limited = true;
    }
}

// A job manager that started again asks for a job's share here (doc/spec/
// shell.md §8): what rank 0 did not take is sent again, its tasks are
// reported running again, and the answer comes when the share ends, at
// once if it has.
void ExecService::on_reattach(const Message& req) {
    auto body = req.json();
    auto id = body ? json_field<uint64_t>(*body, "id", 0, "exec.reattach") : Result<uint64_t>(body.error());
    auto alloc = body ? json_field<double>(*body, "alloc", 0, "exec.reattach") : Result<double>(body.error());
    if (!id || !alloc || !body->contains("id"))
        return broker_.respond_error(req, EPROTO, "exec.reattach: expected {\"id\": JOBID, \"alloc\": TIME}");
    auto it = jobs_.find(*id);
    if (it != jobs_.end() && it->second->alloc == 0 && it->second->phase != LocalJob::Phase::held)
        it->second->alloc = *alloc;  // adopted (its shell does not say): no later run starts before it ends
    if (it != jobs_.end() && is_phantom(*it->second, *alloc)) {
        end_phantom(*id, "ended");
        it = jobs_.end();
    }
    std::optional<EndedShares::End> ended = it == jobs_.end() ? ended_->find(*id) : std::nullopt;
    if (ended && ended->alloc > 0 && *alloc > 0 && ended->alloc != *alloc)
        ended.reset();  // another run's: an earlier one, or one rank 0 never stored
    if (it == jobs_.end() && !ended &&
        adopt_shell(fmt::format("{}/jobs/{}/reattach.sock", broker_.bootstrap().rundir, *id), *id))
        it = jobs_.find(*id);  // its shell began waiting after this service started
    if (it == jobs_.end()) {
        if (!ended && never_ran(*id, *alloc)) {
            // What a shell that died held (its directory) goes: the job
            // manager sends exec.run again.
            std::error_code ec;
            std::filesystem::remove_all(fmt::format("{}/jobs/{}", broker_.bootstrap().rundir, *id), ec);
            return broker_.respond(Message::response_to(req, {{"absent", true}}));
        }
        if (!ended)
            return broker_.respond_error(
                req, ENOENT, fmt::format("{} has nothing here (rank {})", format_jobid(*id), broker_.bootstrap().rank));
        // What it kept goes first: the answer brings the job's finish.
        for (auto& message : ended_->take_kept(*id))  // sent once
            broker_.rpc(Message::request(message.topic, message.body, 0),
                        [id = *id, topic = message.topic](const Message& resp) {
                            if (resp.errnum)
                                log::warning("exec", "{}: {} lost: {}", format_jobid(id), topic, resp.error_text());
                        });
        broker_.respond(Message::response_to(req, {{"status", ended->status},
                                                   {"time", ended->time},
                                                   {"started", ended->started},
                                                   {"usage", ended->usage.to_json()}}));
        return;  // kept until it expires: rank 0 may die again before it stores this
    }
    LocalJob& job = *it->second;
    // A multicast's exec.run this answers instead ends: the brokers that
    // relay its answers (overlay.md §10.1) wait for it, and would keep
    // waiting. Nobody above them does: rank 0 asks again only once it
    // heard this rank lost (the relay that said so counted the rank) or
    // as a new process.
    if (job.answers_a_stream())
        broker_.respond_error(*job.answer_to, ECANCELED,
                              fmt::format("rank {}: answered to exec.reattach instead", broker_.bootstrap().rank));
    job.answer_to = req;
    job.answer_to->payload.reset();
    auto kept = std::exchange(job.kept, {});
    job.kept_output.reset();
    for (auto& message : kept)
        send_to_job_manager(*id, job, std::move(message));
    if (job.tasks_ran)
        report_started(*id);
}

// No task of the job's run `alloc` ran here when this rank holds nothing
// of it (no share, no end: asked after both) and never let its tasks
// start, and what would say otherwise is still kept: every share since
// before the alloc (records begun later, after a reboot, know nothing of
// what ran before), and every end and start since (both are kept for
// exec.reattach-timeout).
bool ExecService::never_ran(JobId id, double alloc) const {
    if (alloc <= 0 || ended_->records_since() > alloc - kClockSlack ||
        wall_now() > alloc + reattach_timeout_ - kClockSlack)
        return false;
    return !ended_->was_let_go(id, alloc);
}

void ExecService::on_reconcile(const Message& req) {
    auto body = req.json();
    if (!body || !body->contains("keep") || !(*body)["keep"].is_array())
        return broker_.respond_error(req, EPROTO, "exec.reconcile: expected {\"keep\": [JOBID, ...]}");
    std::set<JobId> keep;
    for (const auto& id : (*body)["keep"])
        if (id.is_number_unsigned())
            keep.insert(id.get<JobId>());
    adopt_orphaned_shells();  // a shell that began waiting after this service started is judged too
    nlohmann::json killed =
        kill_jobs([&keep](JobId id) { return !keep.count(id); },
                  fmt::format("rank 0 has no such job running on rank {} (it ended while the rank was away, or "
                              "rank 0 never had it)",
                              broker_.bootstrap().rank));
    broker_.respond(Message::response_to(req, {{"killed", killed}}));
}

void ExecService::check_parent() {
    if (broker_.overlay().parent_ready()) {
        cut_off_ = false;
        if (!ended_while_cut_off_.empty())
            report_cut_off_jobs();
        return;
    }
    // Silence is counted from the parent's last word, as the parent counts
    // this rank's (a broker that restarted counts from its own start). A
    // parent that is not rank 0 has this rank lost, and rank 0 its jobs
    // ended, after tbon.lost_timeout; rank 0 itself may be restarting,
    // which its jobs outlive for exec.reattach-timeout (§8).
    const Bootstrap& boot = broker_.bootstrap();
    bool under_rank0 = boot.parent() == 0u;
    double timeout = under_rank0 ? reattach_timeout_ : boot.lost_timeout;
    auto since = std::max(broker_.overlay().parent_last_seen(), started_);
    if (cut_off_ || Clock::now() - since < std::chrono::duration<double>(timeout))
        return;
    cut_off_ = true;
    uint32_t rank = boot.rank;
    std::string why = fmt::format("rank {} has not reached {} for {}s ({})", rank,
                                  under_rank0 ? "rank 0" : fmt::format("its parent (rank {})", *boot.parent()), timeout,
                                  under_rank0 ? "exec.reattach-timeout" : "tbon.lost_timeout");
    for (JobId id : kill_jobs([](JobId) { return true; }, why))
        ended_while_cut_off_.insert(id);
    broker_.overlay().subtree().online.for_each([this, rank, why](uint32_t below) {
        if (below == rank)
            return;
        broker_.rpc(Message::request("exec.cut-off", {{"why", why}}, below), [this, below](const Message& resp) {
            auto body = resp.json();
            auto killed = body && !resp.errnum
                              ? json_field<nlohmann::json>(*body, "killed", nlohmann::json::array(), "exec.cut-off")
                              : Result<nlohmann::json>(make_error(EPROTO, resp.error_text()));
            if (!killed || !killed->is_array())
                return log::warning("exec", "exec.cut-off on rank {}: {}", below,
                                    killed ? "expected killed: [JOBID, ...]" : killed.error().message);
            for (const auto& id : *killed)
                if (id.is_number_unsigned())
                    ended_while_cut_off_.insert(id.get<JobId>());
        });
    });
}

// exec.cut-off {why}: a rank above this one is cut off from its parent;
// the jobs here were ended with it (doc/spec/shell.md §8).
void ExecService::on_cut_off(const Message& req) {
    auto body = req.json();
    auto why = body ? json_field<std::string>(*body, "why", "", "exec.cut-off") : Result<std::string>(body.error());
    if (!why || why->empty())
        return broker_.respond_error(req, EPROTO, "exec.cut-off: expected {\"why\": TEXT}");
    nlohmann::json killed = kill_jobs([](JobId) { return true; }, *why);
    broker_.respond(Message::response_to(req, {{"killed", killed}}));
}

std::vector<JobId> ExecService::kill_jobs(const std::function<bool(JobId)>& which, const std::string& why) {
    std::vector<JobId> ids;
    for (const auto& [id, job] : jobs_)
        if (which(id))
            ids.push_back(id);
    for (JobId id : ids) {  // (kill_now may end a job: not while iterating jobs_)
        log::warning("exec", "{}: {}: killing its tasks", format_jobid(id), why);
        kill_now(id);
    }
    return ids;
}

// Back from a cut-off: rank 0 may not have seen it (it was itself stopped,
// or restarting), and the jobs ended here would run on its other ranks.
// Each gets the exception rank 0 would have raised; one it ended already
// refuses it.
void ExecService::report_cut_off_jobs() {
    uint32_t rank = broker_.bootstrap().rank;
    for (JobId id : std::exchange(ended_while_cut_off_, {})) {
        nlohmann::json body{
            {"id", id},
            {"type", "node-failure"},
            {"severity", 0},
            {"note",
             fmt::format("rank {} was cut off from rank 0: the job's tasks there and below were killed", rank)}};
        broker_.rpc(Message::request("job-manager.raise", body, 0), [id](const Message& resp) {
            if (resp.errnum)
                log::debug("exec", "{}: node-failure not raised: {}", format_jobid(id), resp.error_text());
        });
    }
}

}  // namespace banyan
