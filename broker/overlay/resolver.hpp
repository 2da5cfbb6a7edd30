// Resolves the host name in a tcp:// endpoint off the event loop.
//
// ZeroMQ resolves a tcp:// host name itself, with getaddrinfo in its one
// I/O thread, at every connection attempt: while a lookup waits, every link
// of the broker waits, handshakes included. In a pod whose peers are not in
// DNS yet, a lookup can wait for the upstream resolvers' timeouts (5 s and
// more per try, per search domain): brokers started in the same second
// stalled for 30-60 s, and the handshakes cut short meanwhile were reported
// as certificate failures. So the broker resolves names in threads of its
// own and hands ZeroMQ numeric addresses only.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "core/reactor.hpp"
#include "core/result.hpp"

namespace banyan {

// "tcp://HOST:PORT" with HOST a name (not an address): HOST and PORT.
struct NamedEndpoint {
    std::string host;
    std::string port;
};
std::optional<NamedEndpoint> named_tcp_endpoint(const std::string& uri);

class EndpointResolver {
  public:
    explicit EndpointResolver(Reactor& reactor);
    // Answers still on their way are dropped; a lookup still running ends
    // in its own (detached) thread.
    ~EndpointResolver();

    // Calls `done` on the loop with `uri` where the host name is replaced by
    // its first address (IPv6 in brackets), or an error naming the host.
    // A `uri` that names no host is answered at once, unchanged.
    void resolve(const std::string& uri, std::function<void(Result<std::string>)> done);
    // Lookups started and not yet answered.
    int in_flight() const { return in_flight_; }

  private:
    struct Shared {
        std::mutex mutex;
        Reactor* reactor = nullptr;  // null once the resolver is gone
    };
    Reactor& reactor_;
    std::shared_ptr<Shared> shared_;
    int in_flight_ = 0;
};

}  // namespace banyan
