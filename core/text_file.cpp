#include "core/text_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "core/unique_fd.hpp"

namespace banyan {

// With open and read, not a stream: files of /proc and cgroups are read
// per job on a node, and a stream's buffer and locale cost more than the
// read itself.
Result<std::string> read_text_file(const std::string& path) {
    auto failed = [&path] { return make_error(errno, fmt::format("{}: cannot read: {}", path, std::strerror(errno))); };
    UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd)
        return failed();
    std::string text;
    char buffer[4096];
    for (;;) {
        ssize_t n = read(fd.get(), buffer, sizeof buffer);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return failed();
        if (n == 0)
            return text;
        text.append(buffer, static_cast<size_t>(n));
    }
}

std::vector<pid_t> read_pid_list(const std::string& path) {
    std::vector<pid_t> pids;
    std::string text = read_text_file(path).value_or("");
    const char* p = text.c_str();
    char* end = nullptr;
    for (long pid = std::strtol(p, &end, 10); end != p; p = end, pid = std::strtol(p, &end, 10))
        pids.push_back(static_cast<pid_t>(pid));
    return pids;
}

}  // namespace banyan
