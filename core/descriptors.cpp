#include "core/descriptors.hpp"

#include <cerrno>
#include <cstdlib>
#include <string_view>

#include <dirent.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <unistd.h>

namespace banyan {
namespace {

// Without close_range (a kernel before 5.9, a seccomp filter): one close
// per possible descriptor, up to the process's limit.
void close_each(unsigned first, unsigned last, int keep) {
    long max = sysconf(_SC_OPEN_MAX);
    unsigned limit = max > 0 ? static_cast<unsigned>(max) : 65536u;
    for (unsigned fd = first; fd <= last && fd < limit; fd++)
        if (static_cast<int>(fd) != keep)
            close(static_cast<int>(fd));
}

void close_span(unsigned first, unsigned last, int keep) {
    if (first > last)
        return;
    if (close_range(first, last, 0) != 0)
        close_each(first, last, keep);
}

}  // namespace

void close_descriptors_from(int first, int keep) {
    if (first < 0)
        first = 0;
    if (keep >= first) {
        if (keep > first)
            close_span(static_cast<unsigned>(first), static_cast<unsigned>(keep - 1), keep);
        first = keep + 1;
    }
    close_span(static_cast<unsigned>(first), ~0U, keep);
}

void mark_close_on_exec_from(int first) {
    if (close_range(static_cast<unsigned>(first), ~0U, CLOSE_RANGE_CLOEXEC) == 0)
        return;
    // (Before Linux 5.11: each open descriptor, as /proc lists them.)
    DIR* dir = opendir("/proc/self/fd");
    if (!dir)
        return;
    int own = dirfd(dir);
    while (dirent* entry = readdir(dir)) {
        char* end = nullptr;
        long fd = std::strtol(entry->d_name, &end, 10);
        if (end != entry->d_name && *end == '\0' && fd >= first && fd != own)
            fcntl(static_cast<int>(fd), F_SETFD, fcntl(static_cast<int>(fd), F_GETFD) | FD_CLOEXEC);
    }
    closedir(dir);
}

int mark_close_on_exec_of(const std::string& path) {
    DIR* dir = opendir("/proc/self/fd");
    if (!dir)
        return 0;
    int own = dirfd(dir), marked = 0;
    char target[4096];
    while (dirent* entry = readdir(dir)) {
        char* end = nullptr;
        long fd = std::strtol(entry->d_name, &end, 10);
        if (end == entry->d_name || *end != '\0' || fd == own)
            continue;
        ssize_t n = readlinkat(own, entry->d_name, target, sizeof target - 1);
        if (n <= 0)
            continue;
        std::string_view t(target, static_cast<size_t>(n));
        if (t == path || (t.size() > path.size() + 1 && t.starts_with(path) && t[path.size()] == '-')) {
            fcntl(static_cast<int>(fd), F_SETFD, fcntl(static_cast<int>(fd), F_GETFD) | FD_CLOEXEC);
            ++marked;
        }
    }
    closedir(dir);
    return marked;
}

}  // namespace banyan
