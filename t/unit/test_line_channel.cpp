#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "core/line_channel.hpp"

using namespace banyan;
using namespace std::chrono_literals;

namespace {

// What a channel of max_line 1,000 hands on for `bytes` written to it.
std::vector<std::string> received(const std::vector<std::string>& writes) {
    Reactor reactor;
    int in[2], out[2];
    REQUIRE(pipe2(in, O_CLOEXEC) == 0);
    REQUIRE(pipe2(out, O_CLOEXEC) == 0);
    std::vector<std::string> got;
    LineChannel channel(
        reactor, in[0], out[1],
        [&](Result<nlohmann::json> m) {
            got.push_back(m ? m->dump() : (m.error().code == EMSGSIZE ? "EMSGSIZE: " : "error: ") + m.error().message);
        },
        [&] { reactor.stop(); }, 1000);
    close(out[0]);
    for (const auto& w : writes) {
        REQUIRE(write(in[1], w.data(), w.size()) == static_cast<ssize_t>(w.size()));
        channel.read_available();  // one read per write: lines split across reads
    }
    close(in[1]);
    reactor.run_for(5s);
    return got;
}

}  // namespace

TEST_CASE("a line channel hands on each JSON line, whole, across reads", "[line_channel]") {
    CHECK(received({"{\"a\":", "1}\n{\"b\"", ":2}\n\n"}) == std::vector<std::string>{"{\"a\":1}", "{\"b\":2}"});
    CHECK(received({"[1]\n{\"c\":3}\n"}) ==
          std::vector<std::string>{"error: a line that is not a JSON object", "{\"c\":3}"});
}

TEST_CASE("a line over the cap is dropped as it comes, reported once, and the next line is read", "[line_channel]") {
    std::string part(600, 'x');
    // Over the cap across three reads, without ever holding it whole.
    CHECK(received({"{\"s\":\"" + part, part, part + "\"}\n{\"after\":1}\n"}) ==
          std::vector<std::string>{"EMSGSIZE: a line over 1000 bytes: dropped", "{\"after\":1}"});
    // Over the cap within one read.
    CHECK(received({std::string(1500, ' ') + "\n{\"after\":2}\n"}) ==
          std::vector<std::string>{"EMSGSIZE: a line over 1000 bytes: dropped", "{\"after\":2}"});
    // Exactly at the cap: taken.
    std::string at_cap = "{\"s\":\"" + std::string(1000 - 8, 'y') + "\"}";
    REQUIRE(at_cap.size() == 1000);
    CHECK(received({at_cap + "\n"}) == std::vector<std::string>{at_cap});
}
