// banyan-shell: started by the exec service, one per job per rank; not run
// by hand. Its stdin and stdout carry the protocol of doc/spec/shell.md.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include <fcntl.h>
#include <unistd.h>

#include "core/json_parse.hpp"
#include "core/log.hpp"
#include "shell/fork_server.hpp"
#include "shell/shell.hpp"

int main(int argc, char** argv) {
    // banyan-imp passes the jobspec the user signed on fd 3.
    bool signed_fd = argc == 2 && std::strcmp(argv[1], "--signed-jobspec-fd=3") == 0;
    bool fork_server = argc == 2 && std::strcmp(argv[1], "--fork-server") == 0;
    if (fork_server && !isatty(0))
        banyan::serve_forks(argv[1]);  // returns in a job's shell, forked
    else if ((argc > 1 && !signed_fd) || isatty(0)) {
        std::fprintf(stderr, "banyan-shell: started by the exec service of banyan-broker, not by hand\n");
        return 2;
    }
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
    int devnull = open("/dev/null", O_RDONLY);
    if (in < 0 || out < 0 || devnull < 0 || dup2(devnull, 0) < 0 || dup2(2, 1) < 0) {
        std::perror("banyan-shell: setting up its pipes");
        return 1;
    }
    close(devnull);
    // The shell binds to CPUs and needs no I/O devices: hwloc would load its
    // I/O plugins anyway (GL pulls in libX11), 5 ms of every launch. Tasks
    // do not inherit this: they get the job's environment.
    setenv("HWLOC_PLUGINS_BLACKLIST", "hwloc_gl,hwloc_opencl,hwloc_pci,hwloc_xml_libxml", 0);
    banyan::Reactor reactor;
    banyan::Shell shell(reactor, in, out, std::move(signed_jobspec));
    reactor.run();
    return shell.exit_code();
}
