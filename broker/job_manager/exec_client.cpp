#include "broker/job_manager/exec_client.hpp"

#include <algorithm>
#include <cmath>
#include <csignal>

#include <fmt/format.h>

#include "broker/builtin/multicast.hpp"
#include "broker/job_manager/job_manager.hpp"
#include "core/json_field.hpp"
#include "core/log.hpp"
#include "resource/rv1.hpp"

namespace banyan {

ExecClient::ExecClient(JobTable& table) : table_(table) {
    double expiration = table_.broker().bootstrap().expiration;
    if (expiration > 0) {
        double left = std::max(0.0, expiration - wall_now());
        instance_end_ = expiration - std::min(5.0, left / 10);
    }
    // The exec service refused a bad value before this service started.
    lost_wait_ = table_.broker().bootstrap().config.get_duration("exec.reattach-timeout", 300.0).value_or(300.0);
}

// Counted and timed before anything is sent: the exec service of this rank
// answers (and reports started) within broker_.rpc, and the last answer
// ends the execution.
ExecClient::Execution& ExecClient::begin(Job& job, size_t nranks, double end) {
    Execution& ex = executing_[job.id];
    ex.ranks_left = ex.ranks_starting = nranks;
    arm_time_limit(job, ex, end);
    return ex;
}

// END: seconds since the epoch, 0 for none; the enclosing job's limit
// bounds every job.
void ExecClient::arm_time_limit(const Job& job, Execution& ex, double end) {
    if (instance_end_ > 0)
        end = end > 0 ? std::min(end, instance_end_) : instance_end_;
    ex.time_limit.reset();
    if (end > 0) {
        ex.time_limit = std::make_unique<Timer>(table_.broker().reactor());
        ex.time_limit->start(delay_until(end), [this, id = job.id] {
            if (Job* j = table_.find(id); j && j->state == JobState::run)
                table_.raise(*j, "timeout", "the job reached its time limit", 0);
        });
    }
    ex.end = end;
}

void ExecClient::time_limit_changed(Job& job) {
    auto ex = executing_.find(job.id);
    if (ex == executing_.end())
        return;
    arm_time_limit(job, ex->second, job.duration > 0 ? job.t_run + job.duration : 0);
    ex->second.warning.reset();
    if (job.started)
        arm_warning(job, ex->second);
}

void ExecClient::launch(Job& job, const nlohmann::json& R) {
    auto r = Rv1::from_json(R);
    if (!r || r->ranks.empty())
        return table_.raise(job, "exec", "the allocation has no ranks", 0);
    // The limit runs from now, the job's real start, to the millisecond:
    // R's window is whole seconds from a start rounded down (sched.md §4).
    double window = job.duration > 0 ? job.duration : r->expiration > 0 ? r->expiration - r->starttime : 0;
    Execution& ex = begin(job, r->ranks.size(), window > 0 ? wall_now() + window : 0);
    ex.r_text = R.dump();
    std::vector<uint32_t> ranks;
    for (const auto& [rank, children] : r->ranks)
        ranks.push_back(rank);
    // The jobspec is read from the database (a pending job does not keep
    // it in memory), on the reader thread.
    // With it, the user's signature, for banyan-imp.
    table_.db().read(
        [id = job.id](JobDbReader& reader) { return jobspec_text(reader, id); },
        [this, id = job.id, ranks = std::move(ranks)](Result<std::string> spec) { send_exec_run(id, ranks, spec); });
}

// On the reader thread: `"jobspec":{...}` as stored, with `"J":"..."`, the
// user's signature, when there is one.
Result<std::string> ExecClient::jobspec_text(JobDbReader& reader, JobId id) {
    auto spec = reader.jobspec(id);
    auto signature = reader.signature(id);
    if (auto e = first_error(spec, signature))
        return *e;
    if (signature->empty())
        return fmt::format(R"("jobspec":{})", *spec);
    return fmt::format(R"("jobspec":{},"J":{})", *spec, nlohmann::json(*signature).dump());
}

void ExecClient::send_exec_run(JobId id, const std::vector<uint32_t>& ranks, const Result<std::string>& spec) {
    Job* job = table_.find(id);
    if (!job || !executing_.count(id))
        return;
    if (job->state != JobState::run || !spec) {
        // Ended while its jobspec was read (cancel, time limit), or not
        // readable: nothing was started.
        executing_.erase(id);
        if (job->state == JobState::run)
            return table_.raise(*job, "exec", spec.error().message, 0);  // its cleanup follows
        return table_.release(*job);
    }
    Execution& ex = executing_.at(id);
    ex.sent = true;
    ex.held = !ex.stored;
    // One request down each link of the tree (overlay.md §10.1), each
    // rank's answer back as its share ends.
    Message req = multicast(ranks, "exec.run", exec_run_payload(*job, ex.held, ex.r_text, *spec), true);
    req.flags |= msgflag::streaming;
    auto unanswered = std::make_shared<std::set<uint32_t>>(ranks.begin(), ranks.end());
    table_.broker().rpc(std::move(req),
                        [this, id, unanswered](const Message& resp) { on_multicast_answer(id, *unanswered, resp); });
    send_pending_signals(*job);
}

Message ExecClient::multicast(const std::vector<uint32_t>& ranks, std::string_view topic, const std::string& payload,
                              bool streaming) {
    IdSet set;
    for (uint32_t rank : ranks)
        set.insert(rank);
    return Multicast::request(table_.broker().bootstrap().rank, set, topic, payload, streaming);
}

// Ranks' answers to the job's exec.run ({"answers": [{rank, payload} or
// {rank, errnum, errstr}, ...]}), each taken as that rank's own answer;
// the stream's end, or an error that ends it, answers every rank still
// unanswered.
void ExecClient::on_multicast_answer(JobId id, std::set<uint32_t>& unanswered, const Message& resp) {
    if (resp.errnum) {
        std::string why = resp.errnum == ENODATA ? "no answer came for it" : resp.error_text();
        int errnum = resp.errnum == ENODATA ? EPROTO : static_cast<int>(resp.errnum);
        for (uint32_t rank : std::exchange(unanswered, {}))
            on_exec_response(id, rank,
                             Message::error_to(Message::request("exec.run", nlohmann::json::object(), rank), errnum,
                                               fmt::format("exec.run on rank {}: {}", rank, why)));
        return;
    }
    auto body = resp.json();
    auto answers = body ? json_field<nlohmann::json>(*body, "answers", nlohmann::json::array(), "exec.run")
                        : Result<nlohmann::json>(body.error());
    if (!answers || !answers->is_array())
        return log::warning("job-manager", "{}: exec.run: a malformed answer: {}", format_jobid(id),
                            answers ? "answers: expected an array" : answers.error().message);
    for (const auto& entry : *answers) {
        auto rank = json_field<uint32_t>(entry, "rank", 0, "exec.run.answers[]");
        auto errnum = json_field<int64_t>(entry, "errnum", 0, "exec.run.answers[]");
        auto errstr = json_field<std::string>(entry, "errstr", "", "exec.run.answers[]");
        auto more = json_field<bool>(entry, "more", false, "exec.run.answers[]");
        auto tasks_run = json_field<bool>(json_object_at(entry, {"payload"}), "started", false, "exec.run.answers[]");
        if (auto e = first_error(rank, errnum, errstr, more, tasks_run); e || !unanswered.count(*rank)) {
            log::warning("job-manager", "{}: exec.run: an answer for no rank it waits for: {}", format_jobid(id),
                         e ? e->message : entry.dump());
            continue;
        }
        if (*more) {  // before the share's end: its tasks all run (shell.md §7)
            if (Job* job = table_.find(id); job && *tasks_run)
                started(*job, *rank);
            continue;
        }
        unanswered.erase(*rank);
        Message stub = Message::request("exec.run", nlohmann::json::object(), *rank);
        if (*errnum > 0 && *errnum < 4096)
            on_exec_response(id, *rank, Message::error_to(stub, static_cast<int>(*errnum), *errstr));
        else
            on_exec_response(id, *rank, Message::response_to(stub, json_object_at(entry, {"payload"})));
        if (!executing_.count(id))
            return;  // that answer ended the execution: the rest are no longer its
    }
}

// Written as text: the jobspec goes on as stored, unparsed. An element of
// an array says which, for its environment and file names.
std::string ExecClient::exec_run_payload(const Job& job, bool hold, const std::string& r_text,
                                         const std::string& spec) {
    std::string array = job.array_id ? fmt::format(R"("array":{{"id":{},"index":{},"size":{}}},)", job.array_id,
                                                   job.array_index, job.array_size)
                                     : "";
    std::string ebpf = job.ebpf ? fmt::format(R"("ebpf":{},)", job.ebpf->dump()) : "";
    // `alloc` names the run (shell.md §8): written whole.
    return fmt::format(R"({{"id":{},"userid":{},"alloc":{},{}{}{}"R":{},{}}})", job.id, job.userid,
                       nlohmann::json(job.t_run).dump(), hold ? R"("hold":true,)" : "", array, ebpf, r_text, spec);
}

// The rank never had the job's share, and said so (`absent`, shell.md §8):
// rank 0 died before its exec.run went out, or with the share still held
// there. No task of it ran: it is sent again, as it was (held while the
// alloc is not on disk: exec.go follows, alloc_stored()).
void ExecClient::launch_again(Job& job, uint32_t rank) {
    log::info("job-manager", "{}: rank {} never had the job's share (its start was lost): sent again",
              format_jobid(job.id), rank);
    table_.db().read(
        [id = job.id](JobDbReader& reader) { return jobspec_text(reader, id); },
        [this, id = job.id, rank](Result<std::string> spec) {
            auto ex = executing_.find(id);
            Job* j = table_.find(id);
            if (ex == executing_.end() || !j)
                return;
            if (!spec || j->state != JobState::run || ex->second.r_text.empty()) {
                std::string why = !spec                       ? spec.error().message
                                  : j->state != JobState::run ? "the job ends"
                                                              : "its R is not known here";
                return on_exec_response(
                    id, rank,
                    Message::error_to(Message::request("exec.run", nlohmann::json::object(), rank), ENOENT,
                                      fmt::format("its share on rank {} was not sent again: {}", rank, why)),
                    false);
            }
            Execution& e = ex->second;
            e.held = e.held || !e.stored;
            Message req = Message::request("exec.run", nlohmann::json::object(), rank);
            req.payload = exec_run_payload(*j, !e.stored, e.r_text, *spec);
            table_.broker().rpc(std::move(req),
                                [this, id, rank](const Message& resp) { on_exec_response(id, rank, resp); });
        });
}

void ExecClient::alloc_stored(Job& job) {
    auto it = executing_.find(job.id);
    if (it == executing_.end())
        return;
    Execution& ex = it->second;
    ex.stored = true;
    if (!ex.held)
        return;  // exec.run has not gone out yet: it goes without hold
    ex.held = false;
    if (job.state != JobState::run)
        return;  // ended meanwhile: exec.terminate ends its held start
    table_.broker().send(multicast(job.ranks, "exec.go", nlohmann::json{{"id", job.id}, {"alloc", job.t_run}}.dump()));
}

// Without an answer (one per rank of the job, each crossing the tree): a
// rank that does not hear it is one lost, and its share ends as such; one
// whose share ended already (a kill came first) has nothing to let go.
void ExecClient::send_go(const Job& job, uint32_t rank) {
    table_.broker().send(Message::request("exec.go", {{"id", job.id}, {"alloc", job.t_run}}, rank));
}

// `banyan job kill` before the tasks could be reached: now (each rank
// reads its exec.run first).
void ExecClient::send_pending_signals(Job& job) {
    auto pending = pending_signals_.find(job.id);
    if (pending == pending_signals_.end())
        return;
    auto signals = std::move(pending->second);
    pending_signals_.erase(pending);
    for (int signo : signals)
        if (job.state == JobState::run)  // a launch that failed at once has ended it
            signal_ranks(job, signo);
}

void ExecClient::reattach(Job& job, const IdSet& online, std::string r_text) {
    // The time limit runs from alloc, as R's expiration does.
    Execution& ex = begin(job, job.ranks.size(), job.duration > 0 ? job.t_run + job.duration : 0);
    ex.r_text = std::move(r_text);
    ex.reattached = true;
    ex.sent = true;
    ex.stored = true;
    if (job.started) {
        ex.ranks_starting = 0;
        arm_warning(job, ex);
    }
    std::vector<uint32_t> offline;
    for (uint32_t rank : job.ranks) {
        if (!online.contains(rank)) {
            offline.push_back(rank);
            continue;
        }
        table_.broker().rpc(Message::request("exec.reattach", {{"id", job.id}, {"alloc", job.t_run}}, rank),
                            [this, id = job.id, rank](const Message& resp) { on_exec_response(id, rank, resp); });
        // Its alloc is on disk: a start still held there (its exec.go was
        // lost with the old rank 0) goes on.
        if (job.state == JobState::run)
            send_go(job, rank);
    }
    send_pending_signals(job);  // a kill taken before the instance ran again
    for (uint32_t rank : offline)
        on_exec_response(
            job.id, rank,
            Message::error_to(Message::request("exec.reattach", nlohmann::json::object(), rank), EHOSTUNREACH,
                              fmt::format("rank {} was not online when rank 0 started again", rank)));
}

// A rank lost while its job runs may be a broker that restarts: its shells
// outlive it and wait to be adopted (shell.md §8). The job waits for the
// rank up to exec.reattach-timeout (or its own --reattach-timeout, when
// shorter) instead of failing at once, unless it asked to be requeued. A
// rank online already (it restarted before it was seen lost: its new self
// replaced the old) is asked again at once; one whose ask failed is waited
// for until it is back (ranks_back()), not asked in a loop. The deadline
// holds until the rank has heard the ask (it answers exec.go).
bool ExecClient::wait_for_rank(Job& job, Execution& ex, uint32_t rank, const std::string& why) {
    if (job.state != JobState::run || ex.failed || job.requeue_on_node_failure)
        return false;
    // A job's own tolerance may be shorter, never longer: the rank's shells
    // end their tasks after the instance's.
    bool own = job.reattach_timeout && *job.reattach_timeout < lost_wait_;
    double wait = own ? *job.reattach_timeout : lost_wait_;
    const char* source = own ? "--reattach-timeout" : "exec.reattach-timeout";
    auto& timer = ex.away[rank];
    timer = std::make_unique<Timer>(table_.broker().reactor());
    timer->start(std::chrono::duration_cast<Duration>(std::chrono::duration<double>(wait)), [this, id = job.id, rank,
                                                                                             why, wait, source] {
        give_up_on(id, rank, fmt::format("rank {} was lost and not back within {}s ({}): {}", rank, wait, source, why));
    });
    log::warning("job-manager", "{}: rank {} lost ({}): waiting up to {}s for it to come back", format_jobid(job.id),
                 rank, why, wait);
    if (!ex.asking.contains(rank) && table_.broker().overlay().subtree().online.contains(rank))
        ask_again(job.id, rank);
    return true;
}

// Posted: a rank seen back inside the overlay's handling of its hello has
// not had the answer to it yet, and would drop what comes before.
void ExecClient::ask_again(JobId id, uint32_t rank) {
    table_.broker().reactor().post([this, id, rank] {
        auto ex = executing_.find(id);
        Job* job = table_.find(id);
        if (ex == executing_.end() || !job || job->state != JobState::run || !ex->second.away.count(rank) ||
            ex->second.asking.contains(rank))
            return;  // ended meanwhile (terminate() gives up on it), or asked already
        ex->second.asking.insert(rank);
        ex->second.asked_again.insert(rank);
        log::info("job-manager", "{}: rank {} is back: asking it for the job's share again", format_jobid(id), rank);
        table_.broker().rpc(Message::request("exec.reattach", {{"id", id}, {"alloc", job->t_run}}, rank),
                            [this, id, rank](const Message& resp) { on_exec_response(id, rank, resp); });
        // exec.go: a start held there when the rank went goes on; its
        // answer says the rank heard the ask.
        table_.broker().rpc(Message::request("exec.go", {{"id", id}, {"alloc", job->t_run}}, rank),
                            [this, id, rank](const Message& resp) {
                                auto e = executing_.find(id);
                                if (e == executing_.end())
                                    return;
                                e->second.asking.erase(rank);
                                if (resp.errnum != EHOSTUNREACH)
                                    e->second.away.erase(rank);  // back: the share answers exec.reattach when it ends
                            });
    });
}

// The rank did not come back in time, or the job ended while waiting for
// it: its share counts as failed (node-failure).
void ExecClient::give_up_on(JobId id, uint32_t rank, const std::string& why) {
    auto ex = executing_.find(id);
    if (ex == executing_.end() || !ex->second.away.count(rank))
        return;
    ex->second.away.erase(rank);  // (the timer's callback may be this call: its function is a copy)
    ex->second.asking.erase(rank);
    ex->second.gave_up.insert(rank);  // its share's answer, if it comes, is not counted again
    on_exec_response(id, rank,
                     Message::error_to(Message::request("exec.run", nlohmann::json::object(), rank), EHOSTUNREACH, why),
                     false);
}

void ExecClient::ranks_back(const IdSet& ranks) {
    if (ranks.empty())
        return;
    for (const auto& [id, ex] : executing_)
        for (const auto& [rank, timer] : ex.away)
            if (ranks.contains(rank))
                ask_again(id, rank);
}

void ExecClient::on_exec_response(JobId id, uint32_t rank, const Message& resp, bool may_wait) {
    auto ex_it = executing_.find(id);
    Job* job = table_.find(id);
    if (ex_it == executing_.end() || !job)
        return;
    auto body = resp.errnum ? Result<nlohmann::json>(make_error(static_cast<int>(resp.errnum), resp.error_text()))
                            : resp.json();
    auto status = body ? json_field<int64_t>(*body, "status", 0, "exec") : Result<int64_t>(body.error());
    auto time = body ? json_field<double>(*body, "time", 0, "exec") : Result<double>(body.error());
    auto e = first_error(status, time);
    // Each rank's share is counted once: a rank given up on may still
    // answer the ask it had (the job ends without it meanwhile).
    if (ex_it->second.gave_up.contains(rank) && may_wait)
        return;
    if (body && json_field<bool>(*body, "absent", false, "exec").value_or(false)) {
        ex_it->second.away.erase(rank);
        ex_it->second.asking.erase(rank);
        if (job->state == JobState::run && !job->started && !ex_it->second.failed)
            return launch_again(*job, rank);
        // Its start was stored (every rank had run its tasks), or it
        // ends: nothing of it is left there, as an ENOENT says.
        e = Error{ENOENT, fmt::format("{} has nothing here (rank {})", format_jobid(id), rank)};
    }
    if (!e || e->code != EHOSTUNREACH) {
        ex_it->second.away.erase(rank);  // answered: nothing to wait for
        ex_it->second.asking.erase(rank);
    }
    if (e && e->code == EHOSTUNREACH && may_wait && wait_for_rank(*job, ex_it->second, rank, e->message))
        return;
    if (e && e->code == EHOSTUNREACH && !may_wait && job->state != JobState::run) {
        // Given up on while the job ends (terminate()): it ends anyway.
        ex_it->second.failed = true;
        log::warning("job-manager", "{}: {}", format_jobid(id), e->message);
    } else if (e && e->code == ENOENT && job->state == JobState::cleanup) {
        // Ended before the restart, or never launched: nothing left there.
    } else if (e) {
        ex_it->second.failed = true;
        bool came_back_empty = e->code == ENOENT && ex_it->second.asked_again.contains(rank);
        std::string type = e->code == EHOSTUNREACH || came_back_empty      ? "node-failure"
                           : ex_it->second.reattached && e->code == ENOENT ? "restart"
                                                                           : "exec";
        std::string note =
            came_back_empty ? fmt::format("rank {} came back without the job's tasks: {}", rank, e->message)
            : type == "restart"
                ? fmt::format("rank 0 restarted and rank {} no longer held the job's tasks: {}", rank, e->message)
                : e->message;
        // --requeue: a lost node sends the job back to pending instead.
        if (type == "node-failure" && job->requeue_on_node_failure)
            table_.requeue(*job, fmt::format("node failure, requeued (--requeue): {}", note), 0,
                           [this, id = job->id, note](const std::string& why) {
                               // Not requeued (its run ended otherwise, or is
                               // being requeued already): it ends, as without
                               // --requeue, unless it is on its way already.
                               if (Job* j = table_.find(id);
                                   j && !why.empty() && j->state == JobState::run && !j->requeue_pending)
                                   table_.raise(*j, "node-failure", note, 0);
                           });
        else
            table_.raise(*job, type, note, 0);
        // A local rank answers inside the call that makes it end: the
        // exception's exec.terminate may have ended this execution.
        ex_it = executing_.find(id);
        job = table_.find(id);
        if (ex_it == executing_.end() || !job)
            return;
    } else {
        Execution& ex = ex_it->second;
        ex.max_status = std::max(ex.max_status, static_cast<int>(*status));
        ex.last_end = std::max(ex.last_end, *time);
        const auto& usage = json_object_at(*body, {"usage"});
        // Bounded, as the exec service bounds them: a sum of ranks stays finite.
        double cpu = json_field<double>(usage, "cpu", 0, "exec.usage").value_or(0);
        uint64_t rss = std::min(json_field<uint64_t>(usage, "maxrss", 0, "exec.usage").value_or(0), uint64_t{1} << 50);
        ex.cpu += std::isfinite(cpu) ? std::clamp(cpu, 0.0, 1e12) : 0.0;
        ex.maxrss = std::max(ex.maxrss, rss);
        ex.totalrss += rss;
        // A rank whose share ended while rank 0 was away says whether its
        // tasks had all run: the report it sent then was lost.
        if ((ex.reattached || ex.asked_again.contains(rank)) &&
            json_field<bool>(*body, "started", false, "exec").value_or(false))
            started(*job, rank);
    }
    Execution& ex = ex_it->second;
    if (--ex.ranks_left > 0)
        return;
    bool failed = ex.failed;
    int max_status = ex.max_status;
    nlohmann::json usage{{"cpu", ex.cpu}, {"maxrss", ex.maxrss}, {"totalrss", ex.totalrss}};
    // The real end, when it came while rank 0 was away (by the ranks'
    // clocks: never before the job began).
    double at = ex.reattached ? std::max(ex.last_end, job->t_run) : 0;
    executing_.erase(ex_it);
    if (!failed)
        table_.post(*job, "finish", {{"status", max_status}, {"usage", std::move(usage)}}, at);
    if (job->state == JobState::cleanup)
        table_.release(*job);
}

void ExecClient::signal(const Job& job, int signo) {
    if (auto ex = executing_.find(job.id); ex == executing_.end() || !ex->second.sent)
        pending_signals_[job.id].push_back(signo);  // sent after exec.run (send_exec_run)
    else
        signal_ranks(job, signo);
}

void ExecClient::signal_ranks(const Job& job, int signo) {
    for (uint32_t rank : job.ranks)
        table_.broker().rpc(Message::request("exec.kill", {{"id", job.id}, {"signal", signo}}, rank),
                            [](const Message&) {});
}

void ExecClient::terminate(const Job& job) {
    if (!executing_.count(job.id))
        return;
    nlohmann::json body{{"id", job.id}};
    if (job.terminate_signal > 0)
        body["signal"] = job.terminate_signal;
    if (job.terminate_grace >= 0)
        body["grace"] = job.terminate_grace;
    for (uint32_t rank : job.ranks)
        table_.broker().rpc(Message::request("exec.terminate", body, rank), [](const Message&) {});
    // A lost rank it waited for holds its other ranks' resources no more:
    // back, it is told to end the job's share there (exec.reconcile).
    // Posted: this is inside the job's change of state, and the last
    // answer releases the job.
    auto ex = executing_.find(job.id);
    if (ex == executing_.end())
        return;  // a share here ended at once (a held start)
    for (const auto& [rank, timer] : ex->second.away)
        table_.broker().reactor().post([this, id = job.id, rank] {
            give_up_on(id, rank, fmt::format("rank {} was lost, and the job ended while waiting for it", rank));
        });
}

void ExecClient::started(Job& job, uint32_t rank) {
    auto ex = executing_.find(job.id);
    if (ex == executing_.end() || ex->second.ranks_starting == 0 || ex->second.started_ranks.contains(rank))
        return;  // ended already, or a duplicate
    ex->second.started_ranks.insert(rank);
    if (--ex->second.ranks_starting > 0)
        return;
    table_.post(job, "start");
    arm_warning(job, ex->second);
}

// --signal=SIG@TIME, once the tasks run: sent before, it would reach no
// shell.
void ExecClient::arm_warning(const Job& job, Execution& ex) {
    if (job.warning_signal <= 0 || ex.end <= 0)
        return;
    ex.warning = std::make_unique<Timer>(table_.broker().reactor());
    ex.warning->start(delay_until(ex.end - job.warning_timeleft), [this, id = job.id] {
        if (Job* j = table_.find(id); j && j->state == JobState::run)
            signal_ranks(*j, j->warning_signal);
    });
}

void ExecClient::reconcile(const IdSet& ranks) {
    ranks.for_each([this](uint32_t rank) {
        nlohmann::json keep = nlohmann::json::array();
        // Still executing and not failed (a job that gave up on a lost
        // rank fails, while its other ranks may take a while to end); a
        // job ending on its own keeps its grace period (exec.kill-timeout),
        // and one waiting for this rank is asked for its share next.
        for (const auto& [id, ex] : executing_)
            if (const Job* job = table_.find(id); job && !ex.failed)
                if (std::find(job->ranks.begin(), job->ranks.end(), rank) != job->ranks.end())
                    keep.push_back(id);
        table_.broker().rpc(Message::request("exec.reconcile", {{"keep", keep}}, rank), [rank](const Message& resp) {
            if (resp.errnum)
                log::warning("job-manager", "exec.reconcile on rank {}: {}", rank, resp.error_text());
        });
    });
}

}  // namespace banyan
