// banyan-shell: started by the exec service, one per job per rank; not run
// by hand. Its stdin and stdout carry the protocol of doc/spec/shell.md.
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "core/descriptors.hpp"
#include "core/json_parse.hpp"
#include "core/log.hpp"
#include "core/unique_fd.hpp"
#include "shell/container_holder.hpp"
#include "shell/fork_server.hpp"
#include "shell/pmix_server.hpp"
#include "shell/shell.hpp"

namespace {

// The job, not its broker, is what the kernel's OOM killer takes first
// (doc/spec/shell.md §1): the shell and so its tasks score 200 above the
// broker (from 0 when the broker's is negative), up to the kernel's 1000.
// Raising it needs no privilege.
void raise_oom_score() {
    banyan::UniqueFd fd(open("/proc/self/oom_score_adj", O_RDWR | O_CLOEXEC));
    char text[16] = {};
    if (!fd || read(fd.get(), text, sizeof text - 1) <= 0)
        return;
    int broker = std::atoi(text);
    std::string job = std::to_string(std::min(1000, std::max(broker, 0) + 200));
    if (lseek(fd.get(), 0, SEEK_SET) == 0 && write(fd.get(), job.data(), job.size()) < 0)
        std::fprintf(stderr, "banyan-shell: oom_score_adj %s: %s\n", job.c_str(), std::strerror(errno));
}

}  // namespace

int main(int argc, char** argv) {
    // A job's container holder (doc/spec/shell.md §9), started by its
    // shell: dumpable, unlike a shell, since it writes its own uid_map.
    if (argc == 2 && std::strcmp(argv[1], "--container") == 0 && !isatty(0))
        return banyan::run_container_holder();
    raise_oom_score();
    // Not dumpable (after the write above, which needs its /proc files to
    // be the user's): a task (same user) can neither ptrace its shell nor read
    // its memory, to write on the shell's protocol or take what it holds.
    // (Tasks are dumpable again: exec resets it.)
    prctl(PR_SET_DUMPABLE, 0);
    // banyan-imp passes the jobspec the user signed on fd 3 and the user's
    // lock on this node on fd 4.
    bool signed_fd = argc == 3 && std::strcmp(argv[1], "--signed-jobspec-fd=3") == 0 &&
                     std::strcmp(argv[2], "--user-lock-fd=4") == 0;
    bool fork_server = argc == 2 && std::strcmp(argv[1], "--fork-server") == 0;
    // The shell binds to CPUs and needs no I/O devices: hwloc would load its
    // I/O plugins anyway (GL pulls in libX11, OpenCL and PCI their
    // libraries), 5 ms of every launch. Added to a list there is (the
    // broker's, which keeps the PCI plugin to find GPUs and which the fork
    // server inherits: kept as it was, it had every forked shell load
    // OpenCL's and PCI's libraries again; or a site's). Tasks do not
    // inherit this: they get the job's environment.
    const char* io_plugins = "hwloc_gl,hwloc_opencl,hwloc_pci,hwloc_xml_libxml";
    const char* listed = std::getenv("HWLOC_PLUGINS_BLACKLIST");
    setenv("HWLOC_PLUGINS_BLACKLIST", listed && *listed ? (std::string(listed) + "," + io_plugins).c_str() : io_plugins,
           1);
    if (fork_server && !isatty(0))
        banyan::serve_forks(argv[1]);  // returns in a job's shell, forked
    else if ((argc > 1 && !signed_fd) || isatty(0)) {
        std::fprintf(stderr, "banyan-shell: started by the exec service of banyan-broker, not by hand\n");
        return 2;
    }
    // Whatever it was given beyond its protocol and the signed jobspec is
    // never its tasks' (they get their own descriptors only).
    banyan::mark_close_on_exec_from(signed_fd ? 4 : 3);
    banyan::UniqueFd user_lock(signed_fd ? 4 : -1);
    std::optional<nlohmann::json> signed_jobspec;
    if (signed_fd) {
        std::string text;
        char buf[65536];
        ssize_t n;
        while ((n = read(3, buf, sizeof buf)) > 0)
            text.append(buf, static_cast<size_t>(n));
        close(3);
        auto parsed = banyan::parse_json(text);
        if (!parsed || !parsed->is_object()) {
            std::fprintf(stderr, "banyan-shell: the signed jobspec is not a JSON object\n");
            return 1;
        }
        signed_jobspec = std::move(*parsed);
    }
    // A write to an exec service that is gone must not kill the shell
    // before it has killed its tasks.
    std::signal(SIGPIPE, SIG_IGN);
    // The protocol moves off fds 0 and 1, so that nothing a library prints
    // can corrupt it: stdout goes to stderr (the broker's log).
    int in = fcntl(0, F_DUPFD_CLOEXEC, 3);
    int out = fcntl(1, F_DUPFD_CLOEXEC, 3);
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (in < 0 || out < 0 || devnull < 0 || dup2(devnull, 0) < 0 || dup2(2, 1) < 0) {
        std::perror("banyan-shell: setting up its pipes");
        return 1;
    }
    close(devnull);
    banyan::Reactor reactor;
    banyan::Shell shell(reactor, in, out, std::move(signed_jobspec), std::move(user_lock));
    reactor.run();
    int code = shell.exit_code();
    if (banyan::pmix_finalize_abandoned()) {
        std::fflush(nullptr);
        _exit(code);
    }
    return code;
}
