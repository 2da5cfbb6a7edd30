#include <catch2/catch.hpp>

#include <chrono>

#include "broker/overlay/resolver.hpp"

using namespace banyan;
using namespace std::chrono_literals;

TEST_CASE("only tcp:// endpoints with a host name are looked up", "[resolver]") {
    auto named = named_tcp_endpoint("tcp://node1.banyan:8050");
    REQUIRE(named);
    CHECK(named->host == "node1.banyan");
    CHECK(named->port == "8050");
    for (const char* uri :
         {"tcp://10.0.0.1:8050", "tcp://*:8050", "tcp://[::1]:8050", "ipc:///run/x", "tcp://nohost", "tcp://:8050"}) {
        INFO(uri);
        CHECK(!named_tcp_endpoint(uri));
    }
}

TEST_CASE("the resolver answers on the loop, with an address or a reason", "[resolver]") {
    Reactor reactor;
    EndpointResolver resolver(reactor);
    std::optional<Result<std::string>> local, unknown, numeric;
    resolver.resolve("tcp://localhost:8050", [&](Result<std::string> r) { local = std::move(r); });
    resolver.resolve("tcp://no-such-host.invalid:8050", [&](Result<std::string> r) { unknown = std::move(r); });
    resolver.resolve("tcp://127.0.0.1:9", [&](Result<std::string> r) { numeric = std::move(r); });
    for (int i = 0; i < 1000 && !(local && unknown && numeric); i++)
        reactor.run_for(10ms);
    REQUIRE(local);
    REQUIRE(local->ok());
    CHECK(**local == "tcp://127.0.0.1:8050");  // IPv4 first
    REQUIRE(unknown);
    REQUIRE(!unknown->ok());
    CHECK(unknown->error().message.rfind("cannot resolve no-such-host.invalid: ", 0) == 0);
    REQUIRE(numeric);
    CHECK(**numeric == "tcp://127.0.0.1:9");  // no lookup: as it was
    CHECK(resolver.in_flight() == 0);
}

TEST_CASE("answers due after the resolver is gone are dropped", "[resolver]") {
    Reactor reactor;
    bool called = false;
    {
        EndpointResolver resolver(reactor);
        resolver.resolve("tcp://localhost:8050", [&](Result<std::string>) { called = true; });
    }
    reactor.run_for(300ms);
    CHECK(!called);
}
