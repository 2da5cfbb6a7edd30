#include "broker/builtin/builtin_services.hpp"

#include <fmt/format.h>

#include "broker/broker.hpp"
#include "broker/builtin/multicast.hpp"
#include "core/json_field.hpp"
#include "core/log.hpp"

namespace banyan {
namespace {

constexpr const char* kVersion = "0.1.0";

std::string_view state_name(Broker::State state) {
    switch (state) {
        case Broker::State::join:
            return "join";
        case Broker::State::run:
            return "run";
        case Broker::State::shutdown:
            return "shutdown";
    }
    return "?";
}

void register_broker_methods(Broker& b) {
    b.register_method("broker.ping", false, [&b](const Message& req) {
        auto request = req.json();
        if (!request)
            return b.respond_error(req, EPROTO, request.error().message);
        nlohmann::json body = std::move(*request);
        body["rank"] = b.bootstrap().rank;
        body["hostname"] = b.bootstrap().hostname;
        body["route"] = req.route;
        b.respond(Message::response_to(req, body));
    });
    b.register_method("broker.info", false, [&b](const Message& req) {
        const Bootstrap& boot = b.bootstrap();
        nlohmann::json body = {{"rank", boot.rank},
                               {"size", boot.size},
                               {"fanout", boot.fanout},
                               {"hostname", boot.hostname},
                               {"state", state_name(b.state())},
                               {"uptime", b.uptime()},
                               {"version", kVersion},
                               {"protocol", boot.protocol},
                               {"quorum", boot.quorum},
                               {"online", b.online_count()}};
        if (auto parent = boot.parent())
            body["parent"] = *parent;
        b.respond(Message::response_to(req, body));
    });
    b.register_method("broker.ready", false, b.at_rank0([&b](const Message& req) {
        b.when_running([&b, req] {
            b.respond(Message::response_to(req, {{"size", b.bootstrap().size}, {"online", b.online_count()}}));
        });
    }));
    b.register_method("broker.dmesg", true, [&b](const Message& req) {
        b.respond(Message::response_to(req, {{"lines", log::recent()}}));
    });
    b.register_method("broker.shutdown", true, b.at_rank0([&b](const Message& req) {
        auto body = req.json();
        auto keep_jobs =
            body ? json_field<bool>(*body, "keep_jobs", false, "broker.shutdown") : Result<bool>(body.error());
        if (!keep_jobs)
            return b.respond_error(req, EPROTO, keep_jobs.error().message);
        b.respond(Message::response_to(req, nlohmann::json::object()));
        b.begin_shutdown(fmt::format("requested by uid {}", req.userid), *keep_jobs);
    }));
}

void register_event_methods(Broker& b) {
    b.register_method("event.publish", false, b.at_rank0([&b](const Message& req) {
        auto body = req.json();
        if (!body)
            return b.respond_error(req, EPROTO, body.error().message);
        if (!body->contains("topic") || !(*body)["topic"].is_string())
            return b.respond_error(req, EPROTO, "event.publish: expected {\"topic\": STRING, \"payload\": OBJECT}");
        std::string topic = (*body)["topic"].get<std::string>();
        auto payload = json_field(*body, "payload", nlohmann::json::object());
        auto private_event = json_field(*body, "private", false);
        if (auto e = first_error(payload, private_event))
            return b.respond_error(req, EPROTO, "event.publish: " + e->message);
        if (topic.empty() || topic.size() > kMaxTopic || topic.find(' ') != std::string::npos)
            return b.respond_error(req, EINVAL, fmt::format("event.publish: bad topic '{}'", topic));
        b.publish_event(topic, *payload, *private_event, req.userid);
        b.respond(Message::response_to(req, nlohmann::json::object()));
    }));
    auto subscription = [&b](const Message& req, bool subscribe) {
        auto body = req.json();
        if (!body || !body->contains("topic") || !(*body)["topic"].is_string())
            return b.respond_error(req, EPROTO, fmt::format("{}: expected {{\"topic\": PREFIX}}", req.topic));
        if (req.route.empty() || !LocalConnector::is_connection_id(req.route.front()))
            return b.respond_error(req, EINVAL, fmt::format("{}: only local connections subscribe", req.topic));
        std::string prefix = (*body)["topic"].get<std::string>();
        if (subscribe) {
            if (auto r = b.connector().subscribe(req.route.front(), prefix); !r)
                return b.respond_error(req, r.error().code, r.error().message);
        } else {
            b.connector().unsubscribe(req.route.front(), prefix);
        }
        b.respond(Message::response_to(req, nlohmann::json::object()));
    };
    b.register_method("event.replay", true, b.at_rank0([&b](const Message& req) {
        auto body = req.json();
        auto from = body ? json_field<uint32_t>(*body, "from", 0, "event.replay") : Result<uint32_t>(body.error());
        auto to = body ? json_field<uint32_t>(*body, "to", 0, "event.replay") : Result<uint32_t>(body.error());
        if (auto e = first_error(from, to))
            return b.respond_error(req, EPROTO, e->message);
        if (*from == 0 || *to < *from)
            return b.respond_error(req, EINVAL, "event.replay: expected 0 < from <= to");
        auto events = b.kept_events(*from, *to);
        if (!events)
            return b.respond_error(req, events.error().code, events.error().message);
        b.respond(Message::response_to(req, *events));
    }));
    b.register_method("event.subscribe", false, [subscription](const Message& req) { subscription(req, true); });
    b.register_method("event.unsubscribe", false, [subscription](const Message& req) { subscription(req, false); });
}

}  // namespace

void register_builtin_services(Broker& b) {
    register_broker_methods(b);
    register_event_methods(b);
    Multicast::register_with(b);
    b.register_method("overlay.status", false,
                      [&b](const Message& req) { b.respond(Message::response_to(req, b.overlay().status())); });
}

}  // namespace banyan
