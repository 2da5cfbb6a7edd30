#include "broker/overlay/resolver.hpp"

#include <cstring>
#include <system_error>
#include <thread>

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <fmt/format.h>

namespace banyan {

std::optional<NamedEndpoint> named_tcp_endpoint(const std::string& uri) {
    constexpr std::string_view prefix = "tcp://";
    if (uri.rfind(prefix, 0) != 0)
        return std::nullopt;
    std::string rest = uri.substr(prefix.size());
    size_t colon = rest.rfind(':');
    if (colon == std::string::npos || colon == 0 || rest[0] == '[')
        return std::nullopt;  // no port, or an IPv6 address
    NamedEndpoint e{rest.substr(0, colon), rest.substr(colon + 1)};
    in_addr v4;
    if (inet_pton(AF_INET, e.host.c_str(), &v4) == 1 || e.host == "*")
        return std::nullopt;
    return e;
}

EndpointResolver::EndpointResolver(Reactor& reactor) : reactor_(reactor), shared_(std::make_shared<Shared>()) {
    shared_->reactor = &reactor;
}

EndpointResolver::~EndpointResolver() {
    std::lock_guard lock(shared_->mutex);
    shared_->reactor = nullptr;
}

void EndpointResolver::resolve(const std::string& uri, std::function<void(Result<std::string>)> done) {
    auto named = named_tcp_endpoint(uri);
    if (!named) {
        reactor_.post([shared = shared_, uri, done = std::move(done)] {
            if (shared->reactor)
                done(uri);
        });
        return;
    }
    in_flight_++;
    auto lookup = [shared = shared_, named = *named, done, this]() mutable {
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        addrinfo* found = nullptr;
        int rc = getaddrinfo(named.host.c_str(), named.port.c_str(), &hints, &found);
        Result<std::string> result =
            make_error(EHOSTUNREACH, fmt::format("cannot resolve {}: {}", named.host,
                                                 rc == EAI_SYSTEM ? std::strerror(errno) : gai_strerror(rc)));
        // IPv4 first: a parent bound to tcp://*:PORT listens on IPv4 only
        // (ZeroMQ's default), and localhost often lists ::1 first.
        const addrinfo* pick = rc == 0 ? found : nullptr;
        for (const addrinfo* a = pick; a; a = a->ai_next)
            if (a->ai_family == AF_INET) {
                pick = a;
                break;
            }
        if (pick) {
            char text[INET6_ADDRSTRLEN] = {};
            bool v6 = pick->ai_family == AF_INET6;
            const void* addr = v6 ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(pick->ai_addr)->sin6_addr)
                                  : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(pick->ai_addr)->sin_addr);
            inet_ntop(pick->ai_family, addr, text, sizeof text);
            result = v6 ? fmt::format("tcp://[{}]:{}", text, named.port) : fmt::format("tcp://{}:{}", text, named.port);
        }
        if (found)
            freeaddrinfo(found);
        std::lock_guard lock(shared->mutex);
        if (!shared->reactor)
            return;  // the resolver is gone; so may be `this`
        shared->reactor->post([shared, result = std::move(result), done = std::move(done), this]() mutable {
            if (!shared->reactor)
                return;
            in_flight_--;
            done(std::move(result));
        });
    };
    try {
        std::thread(std::move(lookup)).detach();
    } catch (const std::system_error& e) {
        in_flight_--;
        reactor_.post([shared = shared_, done = std::move(done), why = std::string(e.what())] {
            if (shared->reactor)
                done(make_error(EAGAIN, fmt::format("cannot start a name lookup: {}", why)));
        });
    }
}

}  // namespace banyan
