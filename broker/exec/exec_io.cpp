// The exec service: what reaches a running job's shell on this rank —
// task 0's stdin, requests for a nested instance it runs, and the fence
// its shells meet at on the job's first rank (doc/spec/shell.md §4, §7).
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

#include "broker/builtin/multicast.hpp"
#include "broker/exec/local_job.hpp"
#include "core/duration.hpp"
#include "core/idset.hpp"
#include "core/json_field.hpp"
#include "core/json_parse.hpp"
#include "core/log.hpp"

namespace banyan {
namespace {

// A fence part's answer: `payload`, text made once for every part.
Message fence_answer(const Message& part, const std::string& payload) {
    Message answer = Message::response_to(part, nlohmann::json::object());
    answer.payload = payload;
    return answer;
}

}  // namespace

void ExecService::on_stdin(const Message& req) {
    nlohmann::json body;
    LocalJob* job = job_for(req, body);
    if (!job)
        return;
    if (!body.contains("data") || !body["data"].is_string())
        return broker_.respond_error(req, EPROTO, "exec.stdin: expected {\"id\", \"data\": STRING, \"eof\"?}");
    // {data, encoding?, eof} is what the shell takes: passed on as it is.
    body.erase("id");
    body["type"] = "stdin";
    to_shell(*job, std::move(body));
    broker_.respond(Message::response_to(req, nlohmann::json::object()));
}

// A request for the nested instance the job runs (doc/spec/instances.md
// §5), from job-manager.proxy: passed to the job's shell on this rank,
// which sends it on as the job's user and answers.
void ExecService::on_proxy(const Message& req) {
    nlohmann::json body;
    LocalJob* job = job_for(req, body);
    if (!job)
        return;
    auto uri = json_field<std::string>(body, "uri", "", "exec.proxy");
    if (!uri)
        return broker_.respond_error(req, EPROTO, uri.error().message);
    if (!job->channel || job->phase == LocalJob::Phase::held)
        return broker_.respond_error(req, EAGAIN, "the job's shell is not running here yet");
    uint64_t tag = job->next_proxy_tag++;
    job->proxied.emplace(tag, req);
    job->channel->send(
        {{"type", "proxy"}, {"tag", tag}, {"uri", *uri}, {"request", json_object_at(body, {"request"})}});
}

// At the job's first rank: answered for all shells once all have come.
// A contribution may arrive before this rank's own exec.run: it waits
// here all the same.
void ExecService::on_fence(const Message& req) {
    auto body = req.json();
    if (!body)
        return broker_.respond_error(req, EPROTO, body.error().message);
    auto id = json_field<uint64_t>(*body, "id", 0, "exec.fence");
    auto seq = json_field<uint64_t>(*body, "seq", 0, "exec.fence");
    auto rank = json_field<uint32_t>(*body, "rank", 0, "exec.fence");
    auto nshells = json_field<uint32_t>(*body, "nshells", 1, "exec.fence");
    auto data = json_field<std::string>(*body, "data", "", "exec.fence");
    auto multicast = json_field<bool>(*body, "multicast", false, "exec.fence");
    if (auto e = first_error(id, seq, rank, nshells, data, multicast))
        return broker_.respond_error(req, EPROTO, e->message);
    Fence& fence = fences_[{*id, *seq}];
    // The answer, every shell's data in one message, must fit in a
    // message (16 MiB, kDefaultMaxPayload), base64 and JSON included.
    constexpr size_t kFenceDataLimit = size_t{12} << 20;
    fence.bytes += data->size();
    if (fence.bytes > kFenceDataLimit && !fence.failed) {
        fence.failed = true;
        for (const Fence::Part& w : fence.waiting)
            broker_.respond_error(w.request, E2BIG,
                                  "the job's fence data is over 12 MiB in all (one message carries it)");
        fence.failed_parts = static_cast<uint32_t>(fence.waiting.size());
        fence.waiting.clear();
        fence.data = nlohmann::json::object();
    }
    if (fence.failed) {
        broker_.respond_error(req, E2BIG, "the job's fence data is over 12 MiB in all (one message carries it)");
        if (++fence.failed_parts >= *nshells)
            fences_.erase({*id, *seq});
        return;
    }
    fence.data[std::to_string(*rank)] = std::move(*data);
    fence.waiting.push_back({req, *rank, *multicast});
    fence.waiting.back().request.payload.reset();
    if (fence.data.size() < *nshells)
        return;
    // The result, every part in one text made once. A part of protocol 2
    // gets it in its answer; the others by one multicast from here.
    auto result = std::make_shared<std::string>(nlohmann::json{{"seq", *seq}, {"data", fence.data}}.dump());
    std::map<uint32_t, Message> by_multicast;
    for (Fence::Part& w : fence.waiting) {
        if (w.by_multicast) {
            by_multicast.emplace(w.rank, std::move(w.request));
            continue;
        }
        broker_.respond(fence_answer(w.request, *result));
    }
    fences_.erase({*id, *seq});
    if (!by_multicast.empty())
        multicast_fence_result(*id, *seq, std::move(result), std::move(by_multicast));
}

// One copy of the result a link (exec.fence-data as one multicast, where
// N answers of it would cross the links near this rank N times: overlay.md
// §11). Each part is answered once its rank has the result, `{seq,
// "multicast": true}`, or with the result itself where the multicast
// could not put it (a link lost, or reconnecting, on the way: an answer is
// kept across a reconnection, a request is not). `alloc` names the run: a
// rank where the job runs again takes no result of the run before.
void ExecService::multicast_fence_result(JobId id, uint64_t seq, std::shared_ptr<const std::string> result,
                                         std::map<uint32_t, Message> parts) {
    auto job = jobs_.find(id);
    double alloc = job == jobs_.end() ? 0 : job->second->alloc;
    IdSet ranks;
    for (const auto& [rank, part] : parts)
        ranks.insert(rank);
    std::string payload = fmt::format(R"({{"id":{},"alloc":{},{})", id, nlohmann::json(alloc).dump(),
                                      std::string_view(*result).substr(1));
    Message request = Multicast::request(broker_.bootstrap().rank, ranks, "exec.fence-data", payload, false);
    request.flags |= msgflag::streaming;
    auto waiting = std::make_shared<std::map<uint32_t, Message>>(std::move(parts));
    std::string said = nlohmann::json{{"seq", seq}, {"multicast", true}}.dump();
    broker_.rpc(std::move(request), [this, waiting, result, said](const Message& resp) {
        auto answer = [&](uint32_t rank, bool delivered) {
            auto it = waiting->find(rank);
            if (it == waiting->end())
                return;
            Message each = fence_answer(it->second, delivered ? said : *result);
            waiting->erase(it);
            broker_.respond(std::move(each));
        };
        if (resp.errnum == 0) {
            auto body = resp.json();
            for (const auto& entry : body ? json_array_at(*body, "answers") : nlohmann::json::array()) {
                auto rank = json_field<uint32_t>(entry, "rank", 0, "exec.fence-data");
                if (rank && entry.contains("rank"))
                    answer(*rank, entry.contains("payload"));
            }
            if (!resp.is_final_response())
                return;
        }
        while (!waiting->empty())  // the stream's end: what it did not confirm
            answer(waiting->begin()->first, false);
    });
}

// exec.fence-data {id, seq, data}: a fence's result, multicast by the
// job's first rank to the ranks whose parts asked for it so (on_fence).
// Its data (every shell's part: N·s bytes) goes on to the shell unparsed.
void ExecService::on_fence_data(const Message& req) {
    auto parsed = parse_json_except(req.payload ? std::string_view(*req.payload) : "{}", "data");
    auto id = parsed ? json_field<uint64_t>(parsed->rest, "id", 0, "exec.fence-data") : parsed.error();
    auto seq = parsed ? json_field<uint64_t>(parsed->rest, "seq", 0, "exec.fence-data") : parsed.error();
    auto alloc = parsed ? json_field<double>(parsed->rest, "alloc", 0, "exec.fence-data") : parsed.error();
    if (first_error(id, seq, alloc) || !parsed->rest.contains("id") || !parsed->rest.contains("seq") || !parsed->raw ||
        parsed->raw->front() != '{')
        return broker_.respond_error(
            req, EPROTO, "exec.fence-data: expected {\"id\": JOBID, \"alloc\": TIME, \"seq\": N, \"data\": OBJECT}");
    auto it = jobs_.find(*id);
    if (it == jobs_.end() || (*alloc > 0 && it->second->alloc > 0 && *alloc != it->second->alloc))
        return broker_.respond_error(req, ENOENT, fmt::format("{}: this run has nothing here", format_jobid(*id)));
    hand_fence_to_shell(*it->second, *seq, *parsed->raw);
    if (req.wants_response())
        broker_.respond(Message::response_to(req, nlohmann::json::object()));
}

void ExecService::hand_fence_to_shell(LocalJob& job, uint64_t seq, std::string_view data) {
    if (!job.fences_asked.erase(seq))
        return;
    std::string line = fmt::format(R"({{"type":"fence","seq":{},"data":{}}})", seq, data);
    std::replace(line.begin(), line.end(), '\n', ' ');  // (whitespace between tokens: a string holds none raw)
    to_shell_line(job, std::move(line));
}

}  // namespace banyan
