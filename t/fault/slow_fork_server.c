/* slow_fork_server: an LD_PRELOAD shim that makes the shell fork server
 * (banyan-shell --fork-server) busy for BANYAN_SLOW_FORK_MS milliseconds
 * of CPU before it reads each request, as a server on a machine whose
 * cores are all taken is slow to answer. Only that process: the broker
 * and the shells (whose flag is blanked) are untouched. It spins rather
 * than sleeps, so the server is at work, as a slow one is. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int is_fork_server(void) {
    char cmdline[4096];
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, cmdline, sizeof cmdline - 1);
    close(fd);
    if (n <= 0)
        return 0;
    for (ssize_t i = 0; i + 13 <= n; i++)
        if (memcmp(cmdline + i, "--fork-server", 13) == 0)
            return 1;
    return 0;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

ssize_t recvmsg(int fd, struct msghdr* msg, int flags) {
    static ssize_t (*real)(int, struct msghdr*, int);
    if (!real)
        *(void**)(&real) = dlsym(RTLD_NEXT, "recvmsg");
    const char* ms = getenv("BANYAN_SLOW_FORK_MS");
    if (ms && atol(ms) > 0 && is_fork_server()) {
        double end = now() + atol(ms) / 1000.0;
        volatile unsigned long spin = 0;
        while (now() < end)
            spin++;
    }
    return real(fd, msg, flags);
}
