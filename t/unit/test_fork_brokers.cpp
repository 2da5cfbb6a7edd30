// `banyan-broker --fork-brokers`, driven as `banyan start` drives it
// (broker/fork_brokers.hpp), and its answers to what banyan start never sends.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/fork_sibling.hpp"
#include "core/reactor.hpp"
#include "core/text_file.hpp"
#include "core/unique_fd.hpp"
#include "core/unix_socket.hpp"

using namespace banyan;

namespace {

struct Forker {
    Reactor reactor;
    UniqueFd socket;
    std::unique_ptr<Subprocess> process;
    std::optional<int> status;

    explicit Forker(size_t room) {
        int pair[2];
        REQUIRE(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) == 0);
        socket = UniqueFd(pair[0]);
        UniqueFd theirs(pair[1]);
        timeval limit{.tv_sec = 30, .tv_usec = 0};  // a forker that hangs fails the test, not ctest's limit
        setsockopt(socket.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
        auto spawned = Subprocess::spawn(
            reactor, {.argv = {BANYAN_BROKER_PATH, "--fork-brokers", std::string(room, ' ')}, .fd3 = theirs.get()},
            [this](int s) { status = s; });
        REQUIRE(spawned);
        process = std::move(*spawned);
    }

    // The answer to one request: the pid or -errno, and the pidfd if any.
    std::pair<int32_t, std::optional<UniqueFd>> ask(const std::string& request, std::vector<int> fds = {}) {
        REQUIRE(send_with_fds(socket.get(), request, fds));
        int32_t answer = 0;
        std::vector<UniqueFd> got;
        auto n = receive_with_fds(socket.get(), {reinterpret_cast<char*>(&answer), sizeof answer}, got);
        REQUIRE(n);
        REQUIRE(*n == sizeof answer);
        std::optional<UniqueFd> pidfd;
        if (!got.empty())
            pidfd = std::move(got.front());
        return {answer, std::move(pidfd)};
    }
};

std::string arguments(const std::vector<std::string>& args) {
    std::string text;
    for (const auto& a : args)
        text.append(a).push_back('\0');
    return text;
}

}  // namespace

TEST_CASE("the broker forker forks brokers that are our children and refuses what banyan start never sends",
          "[start]") {
    if (!fork_sibling_supported())
        return;  // (a sanitizer build executes each broker)
    auto dir = std::filesystem::temp_directory_path() / ("banyan-unit-forks-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    std::string topology = (dir / "topology.xml").string();
    Forker forker(200);

    CHECK(forker.ask("banyan-broker").first == -EPROTO);                     // not ended by a NUL
    CHECK(forker.ask(std::string("\0a\0", 3)).first == -EPROTO);             // an empty program name
    CHECK(forker.ask(arguments({std::string(4000, 'x')})).first == -E2BIG);  // no room to show it
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    CHECK(forker.ask(arguments({"banyan-broker"}), {devnull}).first == -EPROTO);  // a descriptor with it
    close(devnull);

    // A broker forked with its own arguments: it runs them (here, writes
    // this machine's topology and exits 0), and it is this process's child.
    auto [pid, pidfd] = forker.ask(arguments({"banyan-broker", "--export-topology", topology}));
    REQUIRE(pid > 0);
    CHECK(pidfd.has_value());
    int status = -1;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    auto xml = read_text_file(topology);
    REQUIRE(xml);
    CHECK(xml->find("<topology") != std::string::npos);

    // Bad arguments are the forked broker's to refuse, in its one line.
    auto [bad, bad_pidfd] = forker.ask(arguments({"banyan-broker", "--rank", "x"}));
    REQUIRE(bad > 0);
    REQUIRE(waitpid(bad, &status, 0) == bad);
    CHECK(WEXITSTATUS(status) == 1);

    // Closing the socket ends the forker.
    forker.socket.reset();
    for (int i = 0; i < 100 && !forker.status; i++)
        forker.reactor.run_for(std::chrono::milliseconds(100));
    REQUIRE(forker.status);
    CHECK(exit_code_from_wait_status(*forker.status) == 0);
    std::filesystem::remove_all(dir);
}
