#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <optional>
#include <string>

#include "broker/exec/job_cgroup.hpp"
#include "broker/exec/shell_fork_server.hpp"
#include "core/reactor.hpp"
#include "core/text_file.hpp"
#include "core/unique_fd.hpp"

using namespace banyan;

namespace {

// A cgroup directory opened, then removed: clone3 into it fails after the
// kernel has handed out (and taken back) the child's pidfd.
std::optional<UniqueFd> removed_cgroup() {
    auto mounts = read_text_file("/proc/self/mounts");
    auto own = read_text_file("/proc/self/cgroup");
    auto dir = mounts && own ? own_unified_cgroup(*mounts, *own) : std::nullopt;
    if (!dir)
        return std::nullopt;
    std::string path = *dir + "/banyan-unit-fork-" + std::to_string(getpid());
    if (mkdir(path.c_str(), 0755) != 0)
        return std::nullopt;
    UniqueFd fd(open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    rmdir(path.c_str());
    if (!fd)
        return std::nullopt;
    return fd;
}

}  // namespace

TEST_CASE("the fork server goes on after a shell it could not start in a cgroup removed meanwhile", "[exec]") {
    if (!ShellForkServer::supported())
        return;  // (a sanitizer build executes every shell)
    auto cgroup = removed_cgroup();
    if (!cgroup) {
        WARN("no writable cgroup v2 directory here: nothing to remove");
        return;
    }
    Reactor reactor;
    auto server = ShellForkServer::start(reactor, BANYAN_SHELL_PATH);
    REQUIRE(server);
    int in[2], out[2];
    REQUIRE(pipe2(in, O_CLOEXEC) == 0);
    REQUIRE(pipe2(out, O_CLOEXEC) == 0);
    UniqueFd in_read(in[0]), in_write(in[1]), out_read(out[0]), out_write(out[1]);
    std::optional<bool> refused;
    auto asked = (*server)->fork_shell(
        in_read.get(), out_write.get(), cgroup->get(), [](int) {},
        [&refused](Result<std::unique_ptr<Subprocess>> shell, bool was_refused) { refused = !shell && was_refused; });
    REQUIRE(asked);
    for (int i = 0; i < 100 && !refused; i++)
        reactor.run_for(std::chrono::milliseconds(100));
    REQUIRE(refused);
    CHECK(*refused);  // refused, not a server that died
    CHECK((*server)->usable());
    // And it still forks: a shell with no cgroup, which ends at the end of
    // its stdin (it never got a job).
    std::optional<int> exited;
    std::unique_ptr<Subprocess> shell;
    asked = (*server)->fork_shell(
        in_read.get(), out_write.get(), -1, [&exited](int status) { exited = status; },
        [&shell](Result<std::unique_ptr<Subprocess>> forked, bool) {
            if (forked)
                shell = std::move(*forked);
        });
    REQUIRE(asked);
    for (int i = 0; i < 100 && !shell; i++)
        reactor.run_for(std::chrono::milliseconds(100));
    REQUIRE(shell);
    CHECK((*server)->usable());
    in_write.reset();
    for (int i = 0; i < 100 && !exited; i++)
        reactor.run_for(std::chrono::milliseconds(100));
    CHECK(exited);
}
