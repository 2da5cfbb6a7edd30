#include "broker/job_manager/event_streams.hpp"

#include <fmt/format.h>

#include "broker/job_manager/job_manager.hpp"
#include "core/json_field.hpp"

namespace banyan {

void EventStreams::subscribe(const Message& req) {
    if (!req.has_flag(msgflag::streaming))
        return table_.broker().respond_error(req, EPROTO, "job-manager.events: a streaming request is expected");
    // A user's streams beyond kMaxPerUser end that user's oldest: one user
    // (or a client that dies without cancelling) never ends another's.
    size_t mine = 0;
    auto oldest = subscribers_.end();
    for (auto it = subscribers_.begin(); it != subscribers_.end(); ++it)
        if (it->second.req.userid == req.userid && mine++ == 0)
            oldest = it;
    if (mine >= kMaxPerUser) {
        // Erased before it is answered: an answer may call back into us.
        Message ended = std::move(oldest->second.req);
        subscribers_.erase(oldest);
        table_.broker().respond_error(
            ended, EOVERFLOW, fmt::format("job-manager.events: ended: more than {} streams of one user", kMaxPerUser));
    } else if (subscribers_.size() >= kMaxSubscribers) {
        return table_.broker().respond_error(
            req, EAGAIN, fmt::format("job-manager.events: {} streams are open, the most there may be: try later",
                                     kMaxSubscribers));
    }
    auto [it, added] = subscribers_.emplace(next_subscriber_++, Subscriber{req, (req.rolemask & role::owner) != 0});
    it->second.req.payload.reset();
}

void EventStreams::cancel(const Message& req) {
    auto body = req.json();
    auto matchtag = body ? json_field<uint32_t>(*body, "matchtag", 0, req.topic) : Result<uint32_t>(body.error());
    if (!matchtag)
        return table_.broker().respond_error(req, EPROTO, matchtag.error().message);
    for (auto it = subscribers_.begin(); it != subscribers_.end(); ++it) {
        const Message& s = it->second.req;
        if (s.matchtag == *matchtag && s.route == req.route && s.userid == req.userid) {
            Message ended = std::move(it->second.req);
            subscribers_.erase(it);
            table_.broker().respond_error(ended, ENODATA, "job-manager.events: cancelled");
            break;
        }
    }
    table_.broker().respond(Message::response_to(req, nlohmann::json::object()));
}

void EventStreams::posted(const Job& job, uint32_t seq, const JobEvent& event) {
    if (subscribers_.empty())
        return;
    uint64_t number = next_posted_++;
    pending_.emplace(number, Pending{job.userid,
                                     {{"id", job.id},
                                      {"userid", job.userid},
                                      {"seq", seq},
                                      {"timestamp", event.timestamp},
                                      {"name", event.name},
                                      {"context", event.context}}});
    // Streamed once on disk, as every answer of the job manager is.
    table_.db().after_commit([this, number] { flush(number); });
}

void EventStreams::flush(uint64_t upto) {
    auto end = pending_.upper_bound(upto);
    if (pending_.begin() == end)
        return;
    // Answers go out after the loop: one may call back into us (a
    // stream's reader gone, cancelling) and change subscribers_.
    std::vector<Message> answers;
    for (const auto& [n, sub] : subscribers_) {
        nlohmann::json events = nlohmann::json::array();
        for (auto it = pending_.begin(); it != end; ++it)
            if (sub.owner || it->second.userid == sub.req.userid)
                events.push_back(it->second.event);
        if (events.empty())
            continue;
        Message answer = Message::response_to(sub.req, {{"events", std::move(events)}});
        answer.flags |= msgflag::streaming;
        answers.push_back(std::move(answer));
    }
    pending_.erase(pending_.begin(), end);
    for (auto& answer : answers)
        table_.broker().respond(std::move(answer));
}

}  // namespace banyan
