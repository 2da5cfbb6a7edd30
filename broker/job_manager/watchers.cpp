#include "broker/job_manager/watchers.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "broker/job_manager/job_manager.hpp"
#include "core/io_data.hpp"

namespace banyan {
namespace {

constexpr size_t kAttachOutputBytes = 1 << 20;  // raw bytes per attach answer, plus one chunk

}  // namespace

void Watchers::attach(const Message& req, JobId id, uint32_t events_from, uint32_t output_from) {
    uint64_t watch_id = next_watch_++;
    Watch& watch = attaches_[watch_id] = Watch{req, id, events_from, output_from};
    watch.req.payload.reset();  // parsed once, by the caller
    read_for_attach(watch_id);
}

// Reads what is new for an attach (on the reader thread); one read per
// watch at a time, and one more if a commit came meanwhile.
void Watchers::read_for_attach(uint64_t watch_id) {
    Watch& w = attaches_.at(watch_id);
    if (w.reading) {
        w.stale = true;
        return;
    }
    w.reading = true;
    w.stale = false;
    table_.db().read(
        [id = w.id, events_from = w.events_from,
         output_from = w.output_from](JobDbReader& reader) -> Result<AttachNews> {
            auto events = reader.events(id, events_from);
            if (!events)
                return events.error();
            // A bounded share of the output per answer: JSON escaping can
            // make text up to 6 times longer, and a message holds at most
            // 16 MiB.
            auto output = reader.output(id, output_from, kAttachOutputBytes);
            if (!output)
                return output.error();
            return AttachNews{std::move(*events), std::move(*output)};
        },
        [this, watch_id](const Result<AttachNews>& news) { answer_attach(watch_id, news); });
}

// Answers an attach if there is something new for it, or the job is done.
void Watchers::answer_attach(uint64_t watch_id, const Result<AttachNews>& news) {
    auto found = attaches_.find(watch_id);
    if (found == attaches_.end())
        return;
    Watch& w = found->second;
    w.reading = false;
    const Job* job = table_.find(w.id);
    if (!job || !news) {
        if (!job)
            table_.broker().respond_error(w.req, ENOENT, fmt::format("{}: no such job (purged)", format_jobid(w.id)));
        else
            table_.broker().respond_error(w.req, EIO, news.error().message);
        attaches_.erase(found);
        return;
    }
    uint32_t events_next = w.events_from + static_cast<uint32_t>(news->events.size());
    uint32_t output_next = news->output.empty() ? w.output_from : news->output.back().seq + 1;
    bool done =
        job->state == JobState::inactive && events_next >= job->next_event_seq && output_next >= job->next_output_seq;
    if (news->events.empty() && news->output.empty() && !done) {
        if (w.stale)
            read_for_attach(watch_id);
        return;  // waits for the next commit
    }
    nlohmann::json ev_list = nlohmann::json::array(), out_list = nlohmann::json::array();
    for (const auto& ev : news->events)
        ev_list.push_back(ev.to_json());
    for (const auto& c : news->output)
        put_io_data(out_list.emplace_back(nlohmann::json{{"rank", c.rank}, {"stream", c.stream}}), c.data);
    table_.broker().respond(Message::response_to(w.req, {{"events", std::move(ev_list)},
                                                     {"output", std::move(out_list)},
                                                     {"events_next", events_next},
                                                     {"output_next", output_next},
                                                     {"done", done}}));
    attaches_.erase(found);
}

// After a commit: a watch reads again only if its job has written
// something it has not seen (counted as written, committed or not).
void Watchers::committed() {
    for (auto& [watch_id, w] : attaches_) {
        const Job* job = table_.find(w.id);
        if (!job || job->state == JobState::inactive || job->next_event_seq > w.events_from ||
            job->next_output_seq > w.output_from)
            read_for_attach(watch_id);
    }
}

nlohmann::json Watchers::wait_answer(const Job& job) {
    nlohmann::json out{{"id", job.id}, {"result", job.result()}};
    if (job.status)
        out["status"] = *job.status;
    if (!job.exception_type.empty())
        out["note"] = fmt::format("{}: {}", job.exception_type, job.exception_note);
    return out;
}

void Watchers::wait(const Message& req, const Job& job) {
    // Inactive in memory may still be on its way to disk: the answer waits
    // for the commit all the same (a caller reads the eventlog next).
    if (job.state == JobState::inactive)
        return table_.respond_once_stored(Message::response_to(req, wait_answer(job)));
    Message waiting = req;
    waiting.payload.reset();
    waits_.emplace(job.id, std::move(waiting));
}

void Watchers::wait_all(const Message& req, std::vector<JobId> ids) {
    // Over the cap, the caller's oldest stream ends: one whose client went
    // away (Ctrl-C) would otherwise hold its place until its jobs end.
    auto oldest = wait_alls_.end();
    size_t open = 0;
    for (auto it = wait_alls_.begin(); it != wait_alls_.end(); ++it)
        if (it->second.req.userid == req.userid && open++ == 0)
            oldest = it;
    if (open >= kWaitAllsPerUser) {
        // Erased before it is answered: an answer may call back into us.
        Message ended = std::move(oldest->second.req);
        wait_alls_.erase(oldest);
        table_.broker().respond_error(ended, EOVERFLOW,
                                  fmt::format("job-manager.wait-all: ended: uid {} opened more than {} at once "
                                              "(the oldest ends first)",
                                              req.userid, kWaitAllsPerUser));
    }
    table_.broker().respond(Message::response_to(req, {{"jobs", ids.size()}}));
    if (ids.empty())
        return table_.broker().respond_error(req, ENODATA, "job-manager.wait-all: done");
    Message waiting = req;
    waiting.payload.reset();
    size_t count = ids.size();
    wait_alls_.emplace(next_watch_++, WaitAll{std::move(waiting), std::move(ids), std::vector<bool>(count), count});
}

void Watchers::inactive(const Job& job) {
    auto [first, last] = waits_.equal_range(job.id);
    for (auto it = first; it != last; ++it)
        table_.respond_once_stored(Message::response_to(it->second, wait_answer(job)));
    waits_.erase(first, last);
    for (auto it = wait_alls_.begin(); it != wait_alls_.end();) {
        WaitAll& w = it->second;
        // A job ends once for the stream: one requeued after it ended and
        // ending again is not answered twice (nor counted twice).
        auto waited = std::lower_bound(w.ids.begin(), w.ids.end(), job.id);
        size_t at = static_cast<size_t>(waited - w.ids.begin());
        if (w.req.userid != job.userid || waited == w.ids.end() || *waited != job.id || w.answered[at]) {
            ++it;
            continue;
        }
        w.answered[at] = true;
        table_.respond_once_stored(Message::response_to(w.req, wait_answer(job)));  // streaming, as asked
        if (--w.unanswered > 0) {
            ++it;
            continue;
        }
        table_.respond_once_stored(Message::error_to(w.req, ENODATA, "job-manager.wait-all: done"));
        it = wait_alls_.erase(it);
    }
}

}  // namespace banyan
