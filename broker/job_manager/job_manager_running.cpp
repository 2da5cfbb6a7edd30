// Requests about a running job (RUN, and CLEANUP for late output):
// job-manager.output, raise, started from the exec services; input and
// proxy from users, passed to the job's first rank; instance from a
// nested instance's rank 0 (doc/spec/jobs.md §7, instances.md §4-5).
#include <algorithm>
#include <array>
#include <csignal>
#include <ctime>

#include <unistd.h>

#include <fmt/format.h>

#include "broker/job_manager/job_manager.hpp"
#include "broker/job_manager/signature_check.hpp"
#include "core/duration.hpp"
#include "core/io_data.hpp"
#include "core/json_field.hpp"
#include "core/json_parse.hpp"
#include "core/log.hpp"
#include "core/text.hpp"
#include "sched/jobspec.hpp"
#include "sched/shell_options.hpp"

namespace banyan {
namespace {

constexpr size_t kMaxOutputChunk = 1 << 20;

}  // namespace

// A running job's rank 0 is a nested instance's (doc/spec/instances.md
// §4): recorded as an event, so it outlives a restart of this rank 0.
void JobManager::on_instance(const Message& req) {
    nlohmann::json body;
    Job* job = visible_job(req, body);
    if (!job)
        return;
    auto uri = json_field<std::string>(body, "uri", "", "instance");
    if (!uri)
        return broker_.respond_error(req, EPROTO, uri.error().message);
    if (!uri->starts_with("local:///") || uri->size() > 4096)
        return broker_.respond_error(req, EINVAL, "instance.uri: expected local:///PATH");
    if (job->state != JobState::run)
        return broker_.respond_error(req, EINVAL,
                                     fmt::format("{}: job is {}; only a running job is an instance",
                                                 format_jobid(job->id), state_name(job->state)));
    post(*job, "instance", {{"uri", *uri}});
    respond_once_stored(Message::response_to(req, nlohmann::json::object()));
}

// A request for the nested instance job `id` runs (instances.md §5), from
// its user or the owner: to the exec service of the job's first rank,
// whose shell passes it on as the job's user; its answer comes back as
// this request's.
void JobManager::on_proxy(const Message& req) {
    nlohmann::json body;
    Job* job = visible_job(req, body);
    if (!job)
        return;
    if (job->instance_uri.empty())
        return broker_.respond_error(
            req, EINVAL,
            fmt::format("{} is not an instance (run by banyan batch or banyan alloc)", format_jobid(job->id)));
    if (job->state != JobState::run || job->ranks.empty())
        return broker_.respond_error(
            req, EINVAL,
            fmt::format("{} is {}: its instance has ended", format_jobid(job->id), state_name(job->state)));
    const auto& request = json_object_at(body, {"request"});
    if (request.empty())
        return broker_.respond_error(req, EPROTO,
                                     "job-manager.proxy: expected {\"id\", \"request\": {topic, payload}}");
    nlohmann::json forward{{"id", job->id}, {"uri", job->instance_uri}, {"request", request}};
    broker_.rpc(Message::request("exec.proxy", forward, job->ranks.front()), [this, req](const Message& resp) {
        if (resp.errnum != 0)
            return broker_.respond_error(req, static_cast<int>(resp.errnum), resp.error_text());
        auto payload = resp.json();
        if (!payload)
            return broker_.respond_error(req, EPROTO, payload.error().message);
        broker_.respond(Message::response_to(req, *payload));
    });
}

namespace {

// An output message's optional "chunk": [RANK, INCARNATION, N], N counted
// from 1 by one exec service (doc/spec/shell.md §8).
Result<std::optional<OutputSource>> output_chunk(const nlohmann::json& body) {
    auto chunk = json_field<nlohmann::json>(body, "chunk", nlohmann::json(), "output");
    if (!chunk || chunk->is_null())
        return chunk ? Result<std::optional<OutputSource>>(std::nullopt) : chunk.error();
    if (!chunk->is_array() || chunk->size() != 3 || !(*chunk)[0].is_number_unsigned() ||
        !(*chunk)[1].is_number_unsigned() || !(*chunk)[2].is_number_unsigned() ||
        (*chunk)[0].get<uint64_t>() > UINT32_MAX || (*chunk)[1].get<uint64_t>() > INT64_MAX ||
        (*chunk)[2].get<uint64_t>() > INT64_MAX || (*chunk)[2].get<uint64_t>() == 0)
        return make_error(EPROTO, "output.chunk: expected [rank, incarnation, n] (unsigned; n from 1)");
    return std::optional<OutputSource>(
        OutputSource{(*chunk)[0].get<uint32_t>(), (*chunk)[1].get<uint64_t>(), (*chunk)[2].get<uint64_t>()});
}

}  // namespace

void JobManager::on_output(const Message& req) {
    nlohmann::json body;
    Job* job = visible_job(req, body);
    if (!job)
        return;
    auto task = json_field<uint32_t>(body, "task", 0, "output");
    auto stream = json_field<std::string>(body, "stream", "stdout", "output");
    auto data = io_data(body, "output");
    if (auto e = first_error(task, stream, data))
        return broker_.respond_error(req, EPROTO, e->message);
    if (*stream != "stdout" && *stream != "stderr")
        return broker_.respond_error(req, EINVAL, "output.stream: expected stdout or stderr");
    if (data->size() > kMaxOutputChunk)
        return broker_.respond_error(req, EINVAL, "output.data: more than 1 MiB in one chunk");
    auto chunk = output_chunk(body);
    if (!chunk)
        return broker_.respond_error(req, EPROTO, chunk.error().message);
    if (*chunk) {
        // Exactly once (doc/spec/shell.md §8): an exec service sends again
        // what rank 0 did not answer, which a rank 0 that died may have
        // stored; what was stored from that source is answered again only.
        auto source = std::find_if(job->output_sources.begin(), job->output_sources.end(), [&](const OutputSource& s) {
            return s.rank == (*chunk)->rank && s.incarnation == (*chunk)->incarnation;
        });
        if (source != job->output_sources.end() && (*chunk)->last <= source->last)
            return respond_once_stored(Message::response_to(req, nlohmann::json::object()));
        if (source == job->output_sources.end())
            source = job->output_sources.insert(source, **chunk);
        source->last = (*chunk)->last;
        db_->set_output_source(job->id, *source);
    }
    // Answered once stored: an exec service keeps what is not answered and
    // sends it again to a rank 0 that restarted (doc/spec/shell.md §8).
    if (!job->output_truncated && job->output_bytes + data->size() > limits_.output_limit) {
        // What fits is kept (cut at a character boundary), then one notice
        // where the output stops, so a reader knows it is cut.
        size_t keep = utf8_complete_length(std::string_view(*data).substr(0, limits_.output_limit - job->output_bytes));
        if (keep > 0)
            db_->add_output(job->id, {job->next_output_seq++, *task, *stream, data->substr(0, keep)});
        job->output_truncated = true;
        std::string notice = fmt::format(
            "banyan: output truncated: the job wrote more than {} bytes "
            "(job-manager.output-limit); use --output to keep it all\n",
            limits_.output_limit);
        db_->add_output(job->id, {job->next_output_seq++, *task, "stderr", notice});
    } else if (!job->output_truncated) {
        job->output_bytes += data->size();
        db_->add_output(job->id, {job->next_output_seq++, *task, *stream, *data});
    }
    respond_once_stored(Message::response_to(req, nlohmann::json::object()));
}

// An exception the job's shells raise (exec service, owner only).
void JobManager::on_raise(const Message& req) {
    nlohmann::json body;
    Job* job = visible_job(req, body);
    if (!job)
        return;
    auto type = json_field<std::string>(body, "type", "exec", "raise");
    auto note = json_field<std::string>(body, "note", "", "raise");
    auto severity = json_field<int64_t>(body, "severity", 0, "raise");
    if (!type || !note || !severity || *severity < 0 || *severity > 7)
        return broker_.respond_error(req, EPROTO, "raise: expected {id, type, note, severity 0-7}");
    broker_.respond(Message::response_to(req, nlohmann::json::object()));
    if (job->state != JobState::run)
        return;  // ended already: the first reason stands
    if (*severity == 0)
        return raise(*job, *type, *note, req.userid);
    post(*job, "exception", {{"type", *type}, {"severity", *severity}, {"note", *note}, {"userid", req.userid}});
}

// An exec service's report that its rank's tasks all run: `start` once
// every rank of R has said so.
void JobManager::on_started(const Message& req) {
    nlohmann::json body;
    Job* job = visible_job(req, body);
    if (!job)
        return;
    auto rank = json_field<uint32_t>(body, "rank", 0, "started");
    if (!rank)
        return broker_.respond_error(req, EPROTO, rank.error().message);
    if (req.wants_response())  // a broker of protocol 2 asks for one (overlay.md §3.1)
        broker_.respond(Message::response_to(req, nlohmann::json::object()));
    exec_.started(*job, *rank);
}

// Input for task 0 (banyan run's stdin), passed to the exec service of the
// first rank of R, where task 0 runs (doc/spec/shell.md section 2).
void JobManager::on_input(const Message& req) {
    nlohmann::json body;
    Job* job = visible_job(req, body);
    if (!job)
        return;
    auto data = io_data(body, "input");
    auto eof = json_field<bool>(body, "eof", false, "input");
    // --pty: the size of the CLI's terminal, with or without data.
    auto winsize = json_field<nlohmann::json>(body, "winsize", nlohmann::json::object(), "input");
    auto rows = json_field<uint16_t>(json_object_at(body, {"winsize"}), "rows", 0, "input.winsize");
    auto cols = json_field<uint16_t>(json_object_at(body, {"winsize"}), "cols", 0, "input.winsize");
    if (auto e = first_error(data, eof, winsize, rows, cols))
        return broker_.respond_error(req, EPROTO, e->message);
    if (job->state != JobState::run || job->ranks.empty())
        return broker_.respond_error(req, EINVAL, fmt::format("{}: job is not running", format_jobid(job->id)));
    // Checked above; passed on as it came (data and encoding).
    nlohmann::json forward_body{{"id", job->id}, {"eof", *eof}, {"data", std::move(body["data"])}};
    if (body.contains("encoding"))
        forward_body["encoding"] = std::move(body["encoding"]);
    if (*rows > 0 && *cols > 0)
        forward_body["winsize"] = {{"rows", *rows}, {"cols", *cols}};
    Message forward =
        Message::request("exec.stdin", forward_body, *std::min_element(job->ranks.begin(), job->ranks.end()));
    broker_.rpc(std::move(forward), [this, req](const Message& resp) {
        if (resp.errnum)
            return broker_.respond_error(req, static_cast<int>(resp.errnum), resp.error_text());
        broker_.respond(Message::response_to(req, nlohmann::json::object()));
    });
}

// A rank's eBPF counters (exec service, owner only; doc/spec/profiling.md
// §6): kept in memory while the job runs; a rank's last ones stored.
void JobManager::on_profile(const Message& req) {
    nlohmann::json body;
    Job* job = visible_job(req, body);
    if (!job)
        return;
    auto rank = json_field<uint32_t>(body, "rank", 0, "profile");
    auto time = json_field<double>(body, "time", 0, "profile");
    auto final = json_field<bool>(body, "final", false, "profile");
    if (auto e = first_error(rank, time, final))
        return broker_.respond_error(req, EPROTO, e->message);
    auto data = body.find("data");
    if (data == body.end() || !data->is_object())
        return broker_.respond_error(req, EPROTO, "profile.data: expected an object");
    if (!job->ebpf)
        return broker_.respond_error(req, EINVAL, fmt::format("{}: the job is not profiled", format_jobid(job->id)));
    if (*final)
        db_->add_profile(job->id, *rank, data->dump());
    if (job->state != JobState::inactive) {
        double interval = json_field<double>(*job->ebpf, "interval", 10, "ebpf").value_or(10);
        profiles_.add(job->id, interval, *rank, std::isfinite(*time) ? *time : wall_now(), std::move(*data), *final);
    }
    if (*final)
        return respond_once_stored(Message::response_to(req, nlohmann::json::object()));
    broker_.respond(Message::response_to(req, nlohmann::json::object()));
}

}  // namespace banyan
