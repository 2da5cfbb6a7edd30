#include "broker/fork_brokers.hpp"

#include <dirent.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include <zmq.h>

#include "core/descriptors.hpp"
#include "core/fork_sibling.hpp"
#include "core/unique_fd.hpp"
#include "core/unix_socket.hpp"
#include "resource/discovery.hpp"

namespace banyan {
namespace {

constexpr int kSocket = 3;

void answer(int32_t pid_or_error, int pidfd) {
    if (auto sent = send_fork_answer(kSocket, pid_or_error, pidfd); !sent) {
        std::fprintf(stderr, "banyan-broker --fork-brokers: %s\n", sent.error().message.c_str());
        _exit(1);
    }
}

// In the forked broker: `args` (NUL-ended arguments) written over this
// process's own, which become its argv.
void become_broker(std::string_view args, int& argc, char**& argv) {
    // Descriptors 0-2 only, as an executed broker starts: not our socket,
    // nor what load_once_for_all() opened (ZeroMQ's eventfd; libsodium
    // keeps none where getrandom() works, which clone3's kernels have).
    close_descriptors_from(3);
    // Its own process group, as `banyan start` gives each broker it execs
    // (banyan start sets it too: whichever comes first).
    setpgid(0, 0);
    char* area = argv[0];
    char* area_end = argv[argc - 1] + std::strlen(argv[argc - 1]) + 1;
    std::memcpy(area, args.data(), args.size());
    std::memset(area + args.size(), 0, static_cast<size_t>(area_end - area) - args.size());
    // Without the padding's NULs in /proc/PID/cmdline where allowed
    // (CAP_SYS_RESOURCE); else they read as empty arguments at its end.
    (void)prctl(PR_SET_MM, PR_SET_MM_ARG_END, reinterpret_cast<unsigned long>(area + args.size()), 0, 0);
    static std::vector<char*> own;
    for (char* p = area; p < area + args.size(); p += std::strlen(p) + 1)
        own.push_back(p);
    own.push_back(nullptr);
    argc = static_cast<int>(own.size() - 1);
    argv = own.data();
}

// What every broker would load for itself at start, loaded once here and
// kept while this process lives: hwloc's plugins and ZeroMQ's start
// (OpenPGM's, which opens NSS modules to look up protocols, and
// libsodium's). A context starts no thread before its first socket.
void load_once_for_all() {
    keep_hwloc_plugins_loaded();
    (void)zmq_ctx_new();
}

// fork_sibling() wants one thread: none of the above starts one today;
// one that did (a plugin's library) would make every broker unsafe.
bool single_threaded() {
    int entries = 0;
    if (DIR* dir = opendir("/proc/self/task")) {
        while (dirent* e = readdir(dir))
            entries += e->d_name[0] != '.';
        closedir(dir);
    }
    return entries == 1;
}

}  // namespace

void serve_broker_forks(int& argc, char**& argv) {
    load_once_for_all();
    if (!single_threaded()) {
        // banyan start then executes each broker (it says so).
        std::fprintf(stderr, "banyan-broker --fork-brokers: a library started a thread: not forking\n");
        _exit(1);
    }
    unsetenv("LD_BIND_NOW");  // for the dynamic loader only (environment_binding_now)
    size_t room = static_cast<size_t>(argv[argc - 1] + std::strlen(argv[argc - 1]) + 1 - argv[0]);
    std::vector<char> request(64 * 1024);
    for (;;) {
        std::vector<UniqueFd> fds;
        auto n = receive_with_fds(kSocket, request, fds);
        if (!n) {
            if (n.error().code == EMSGSIZE) {
                answer(-E2BIG, -1);
                continue;
            }
            if (n.error().code == ENOTSOCK || n.error().code == EBADF)
                std::fprintf(stderr, "banyan-broker: --fork-brokers is run by banyan start, not by hand\n");
            else
                std::fprintf(stderr, "banyan-broker --fork-brokers: %s\n", n.error().message.c_str());
            _exit(1);
        }
        if (*n == 0)
            _exit(0);  // banyan start is done with us
        std::string_view args(request.data(), *n);
        // Arguments, each ended by a NUL (the first, the program's name, not
        // empty), that fit where ours are. (An empty message is not one:
        // it reads as the end of the socket.)
        if (!fds.empty() || args.size() > room || args.front() == '\0' || args.back() != '\0') {
            answer(fds.empty() && args.size() > room ? -E2BIG : -EPROTO, -1);
            continue;
        }
        int pidfd = -1;
        long pid = fork_sibling(&pidfd);
        if (pid == 0)
            return become_broker(args, argc, argv);
        answer(pid < 0 ? -errno : static_cast<int32_t>(pid), pidfd);
        if (pidfd >= 0)
            close(pidfd);
    }
}

}  // namespace banyan
