#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <string>
#include <vector>

#include "core/unix_socket.hpp"

using namespace banyan;

namespace {

std::pair<UniqueFd, UniqueFd> seqpacket_pair() {
    int pair[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) == 0);
    return {UniqueFd(pair[0]), UniqueFd(pair[1])};
}

// A pipe: {read end, write end}.
std::pair<UniqueFd, UniqueFd> pipe_pair() {
    int p[2];
    REQUIRE(pipe(p) == 0);
    return {UniqueFd(p[0]), UniqueFd(p[1])};
}

}  // namespace

TEST_CASE("a datagram carries descriptors that work on the other side", "[unix_socket]") {
    auto [a, b] = seqpacket_pair();
    auto [read_end, write_end] = pipe_pair();
    std::array<int, 1> fds{write_end.get()};
    REQUIRE(send_with_fds(a.get(), "f", fds));
    write_end.reset();  // only the passed copy is left

    char byte = 0;
    std::vector<UniqueFd> received;
    auto n = receive_with_fds(b.get(), {&byte, 1}, received);
    REQUIRE(n);
    CHECK(*n == 1);
    CHECK(byte == 'f');
    REQUIRE(received.size() == 1);
    CHECK((fcntl(received[0].get(), F_GETFD) & FD_CLOEXEC) != 0);
    REQUIRE(write(received[0].get(), "hello", 5) == 5);
    received.clear();  // the last writer closes: the reader sees the end
    char text[16] = {};
    CHECK(read(read_end.get(), text, sizeof text) == 5);
    CHECK(std::string(text) == "hello");
    CHECK(read(read_end.get(), text, sizeof text) == 0);
}

TEST_CASE("a datagram without descriptors, and the end of the peer", "[unix_socket]") {
    auto [a, b] = seqpacket_pair();
    int32_t value = -22;
    REQUIRE(send_with_fds(a.get(), {reinterpret_cast<const char*>(&value), sizeof value}, {}));
    int32_t got = 0;
    std::vector<UniqueFd> received;
    auto n = receive_with_fds(b.get(), {reinterpret_cast<char*>(&got), sizeof got}, received);
    REQUIRE(n);
    CHECK(*n == sizeof got);
    CHECK(got == -22);
    CHECK(received.empty());
    a.reset();
    n = receive_with_fds(b.get(), {reinterpret_cast<char*>(&got), sizeof got}, received);
    REQUIRE(n);
    CHECK(*n == 0);
}

TEST_CASE("a datagram too long for the buffer is EMSGSIZE, and its descriptors are closed", "[unix_socket]") {
    auto [a, b] = seqpacket_pair();
    auto [read_end, write_end] = pipe_pair();
    std::array<int, 1> fds{write_end.get()};
    REQUIRE(send_with_fds(a.get(), "four", fds));
    write_end.reset();
    char buffer[2];
    std::vector<UniqueFd> received;
    auto n = receive_with_fds(b.get(), buffer, received);
    REQUIRE(!n);
    CHECK(n.error().code == EMSGSIZE);
    CHECK(received.empty());
    char c;
    CHECK(read(read_end.get(), &c, 1) == 0);  // no write end is left open
}

TEST_CASE("sending to a peer that is gone is EPIPE, not SIGPIPE", "[unix_socket]") {
    auto [a, b] = seqpacket_pair();
    b.reset();
    auto sent = send_with_fds(a.get(), "f", {});
    REQUIRE(!sent);
    CHECK(sent.error().code == EPIPE);
    std::array<int, 9> too_many{};
    too_many.fill(0);
    CHECK(!send_with_fds(a.get(), "f", too_many));
}
