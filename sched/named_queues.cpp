#include "sched/named_queues.hpp"

#include <fmt/format.h>

#include "core/text.hpp"
#include "sched/constraint.hpp"

namespace banyan {

const NamedQueue* NamedQueues::find(const std::string& name) const {
    for (const auto& q : queues)
        if (q.name == name)
            return &q;
    return nullptr;
}

const NamedQueue* NamedQueues::default_queue() const {
    for (const auto& q : queues)
        if (q.is_default)
            return &q;
    return nullptr;
}

std::string NamedQueues::names() const {
    std::vector<std::string> all;
    for (const auto& q : queues)
        all.push_back(q.name);
    return fmt::format("{}", fmt::join(all, ", "));
}

Result<const NamedQueue*> NamedQueues::resolve(const std::string& asked) const {
    if (queues.empty()) {
        if (!asked.empty())
            return make_error(EINVAL, fmt::format("queue '{}': this instance has no queues", asked));
        return nullptr;
    }
    if (asked.empty()) {
        if (const NamedQueue* d = default_queue())
            return d;
        return make_error(EINVAL, fmt::format("no queue given and there is no default queue (queues: {})", names()));
    }
    if (const NamedQueue* q = find(asked))
        return q;
    return make_error(EINVAL, fmt::format("unknown queue '{}' (queues: {})", asked, names()));
}

std::string_view preempt_mode_name(NamedQueue::PreemptMode mode) {
    switch (mode) {
        case NamedQueue::PreemptMode::cancel:
            return "cancel";
        case NamedQueue::PreemptMode::requeue:
            return "requeue";
        case NamedQueue::PreemptMode::off:
            return "off";
    }
    return "off";
}

Result<NamedQueues> NamedQueues::read(const Config& config, QueuePolicy sched_policy) {
    NamedQueues out;
    auto names = config.get_keys("queues");
    if (!names)
        return names.error();
    for (const auto& name : *names) {
        std::string at = "queues." + name;
        if (auto ok = config.check_keys(
                at, {"requires", "default", "max-duration", "max-nodes", "max-active-per-user", "policy", "priority",
                     "priority-tier", "preempt-mode", "preempt-grace", "preempt-signal"});
            !ok)
            return ok.error();
        NamedQueue q;
        q.name = name;
        auto requires_text = config.get_string(at + ".requires", "");
        auto is_default = config.get_bool(at + ".default", false);
        auto max_duration = config.get_duration(at + ".max-duration", 0);
        auto max_nodes = config.get_int(at + ".max-nodes", 0, int64_t{1} << 31, 0);
        auto max_active = config.get_int(at + ".max-active-per-user", 0, int64_t{1} << 31, 0);
        auto policy = config.get_string(at + ".policy", "");
        auto priority = config.get_int(at + ".priority", 0, 1000000, 0);
        auto tier = config.get_int(at + ".priority-tier", 0, 1000, 0);
        auto mode = config.get_string(at + ".preempt-mode", "cancel");
        auto grace = config.get_duration(at + ".preempt-grace", 30);
        auto signal = config.get_string(at + ".preempt-signal", "TERM");
        for (const Error* e :
             {requires_text ? nullptr : &requires_text.error(), is_default ? nullptr : &is_default.error(),
              max_duration ? nullptr : &max_duration.error(), max_nodes ? nullptr : &max_nodes.error(),
              max_active ? nullptr : &max_active.error(), policy ? nullptr : &policy.error(),
              priority ? nullptr : &priority.error(), tier ? nullptr : &tier.error(), mode ? nullptr : &mode.error(),
              grace ? nullptr : &grace.error(), signal ? nullptr : &signal.error()})
            if (e)
                return *e;
        if (*mode != "cancel" && *mode != "requeue" && *mode != "off")
            return make_error(EINVAL, fmt::format("{}: {}.preempt-mode: '{}': expected cancel, requeue or off",
                                                  config.source(), at, one_line(*mode)));
        q.preempt_mode = *mode == "cancel"    ? NamedQueue::PreemptMode::cancel
                         : *mode == "requeue" ? NamedQueue::PreemptMode::requeue
                                              : NamedQueue::PreemptMode::off;
        if (*grace < 0 || *grace > 86400)
            return make_error(EINVAL, fmt::format("{}: {}.preempt-grace: expected 0 to 1d", config.source(), at));
        q.preempt_grace = *grace;
        auto signum = parse_signal(*signal);
        if (!signum)
            return make_error(EINVAL,
                              fmt::format("{}: {}.preempt-signal: {}", config.source(), at, signum.error().message));
        q.preempt_signal = *signum;
        q.priority_tier = *tier;
        if (!requires_text->empty()) {
            auto c = Constraint::parse_query(*requires_text);
            if (!c)
                return make_error(EINVAL, fmt::format("{}: {}.requires: {}", config.source(), at, c.error().message));
            q.requires_text = *requires_text;
            q.constraint = std::move(*c);
        }
        q.policy = sched_policy;
        if (!policy->empty()) {
            auto p = queue_policy_from_name(*policy);
            if (!p)
                return make_error(EINVAL, fmt::format("{}: {}.policy: {}", config.source(), at, p.error().message));
            q.policy = *p;
        }
        q.is_default = *is_default;
        q.max_duration = *max_duration;
        q.max_nodes = *max_nodes;
        q.max_active_per_user = *max_active;
        q.priority = *priority;
        if (q.is_default && out.default_queue())
            return make_error(EINVAL, fmt::format("{}: {}.default: queue '{}' is the default already", config.source(),
                                                  at, out.default_queue()->name));
        out.queues.push_back(std::move(q));
    }
    return out;
}

}  // namespace banyan
