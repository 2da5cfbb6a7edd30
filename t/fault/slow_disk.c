/* slow_disk: an LD_PRELOAD shim that makes each write and sync of the
 * files whose path contains BANYAN_SLOW_DISK_MATCH (default "jobs.db")
 * take BANYAN_SLOW_DISK_MS milliseconds longer, as on a busy or networked
 * disk (only each sync with BANYAN_SLOW_DISK_SYNC_ONLY=1: a disk whose
 * cache is fast and whose flush is slow), and with BANYAN_SLOW_DISK_WHILE=FILE
 * only while FILE exists (a test slows a broker once it has started). A write delayed is a write not yet in the kernel:
 * a SIGKILL inside that window loses it, so a test can crash a broker between accepting a change and its being durable.
 * Other files and sockets are untouched. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

static void slow_down(int fd, int is_sync) {
    const char* sync_only = getenv("BANYAN_SLOW_DISK_SYNC_ONLY");
    if (!is_sync && sync_only && strcmp(sync_only, "1") == 0)
        return;
    const char* gate = getenv("BANYAN_SLOW_DISK_WHILE");
    if (gate && access(gate, F_OK) != 0)
        return;
    const char* ms = getenv("BANYAN_SLOW_DISK_MS");
    const char* match = getenv("BANYAN_SLOW_DISK_MATCH");
    long n = ms ? atol(ms) : 0;
    if (n <= 0)
        return;
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t len = readlink(link, path, sizeof path - 1);
    if (len <= 0)
        return;
    path[len] = '\0';
    if (!strstr(path, match ? match : "jobs.db"))
        return;
    struct timespec ts = {n / 1000, (n % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* POSIX's way to turn dlsym's answer into a function pointer (ISO C has
 * none). */
#define REAL(name, var) *(void**)(&var) = dlsym(RTLD_NEXT, name)

ssize_t pwrite(int fd, const void* buf, size_t count, off_t offset) {
    ssize_t (*real)(int, const void*, size_t, off_t);
    REAL("pwrite", real);
    slow_down(fd, 0);
    return real(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void* buf, size_t count, off64_t offset) {
    ssize_t (*real)(int, const void*, size_t, off64_t);
    REAL("pwrite64", real);
    slow_down(fd, 0);
    return real(fd, buf, count, offset);
}

int fdatasync(int fd) {
    int (*real)(int);
    REAL("fdatasync", real);
    slow_down(fd, 1);
    return real(fd);
}

int fsync(int fd) {
    int (*real)(int);
    REAL("fsync", real);
    slow_down(fd, 1);
    return real(fd);
}
