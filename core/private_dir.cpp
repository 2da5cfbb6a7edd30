#include "core/private_dir.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/unique_fd.hpp"

namespace banyan {
namespace {

Error refuse(const std::string& path, std::string_view why) {
    return make_error(EPERM, fmt::format("{}: {}", path, why));
}

// An ancestor may be root's (/, /var, /run) or ours; if others may write
// it, only the sticky bit keeps them from renaming what we make inside.
Result<void> check_ancestor(const std::string& path, const struct stat& st) {
    uid_t me = geteuid();
    if (st.st_uid != me && st.st_uid != 0)
        return refuse(path, fmt::format("owned by uid {}, not by this user (uid {}) or root", st.st_uid, me));
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
        return refuse(path, "writable by other users (and not sticky)");
    return {};
}

}  // namespace

Result<void> make_private_dir(const std::string& path, unsigned mode) {
    if (path.empty())
        return make_error(EINVAL, "an empty directory name");
    std::filesystem::path full = std::filesystem::absolute(path).lexically_normal();
    if (full.filename().empty())
        full = full.parent_path();
    std::filesystem::path at;
    for (const auto& part : full) {
        at /= part;
        std::string name = at.string();
        struct stat st{};
        if (lstat(name.c_str(), &st) != 0) {
            if (errno != ENOENT)
                return make_error(errno, fmt::format("{}: {}", name, std::strerror(errno)));
            if (mkdir(name.c_str(), mode) != 0 && errno != EEXIST)
                return make_error(errno, fmt::format("cannot make {}: {}", name, std::strerror(errno)));
            if (lstat(name.c_str(), &st) != 0)
                return make_error(errno, fmt::format("{}: {}", name, std::strerror(errno)));
        }
        if (S_ISLNK(st.st_mode)) {
            // Links the system set up (/var/run -> /run) are fine where root owns them.
            if (st.st_uid != 0 || at == full)
                return refuse(name, "a symbolic link");
            if (stat(name.c_str(), &st) != 0)
                return make_error(errno, fmt::format("{}: {}", name, std::strerror(errno)));
        }
        if (!S_ISDIR(st.st_mode))
            return refuse(name, "not a directory");
        if (at == full) {
            uid_t me = geteuid();
            if (st.st_uid != me)
                return refuse(name, fmt::format("owned by uid {}, not by this user (uid {})", st.st_uid, me));
            if (st.st_mode & (S_IWGRP | S_IWOTH))
                return refuse(name, "writable by other users");
        } else if (auto r = check_ancestor(name, st); !r) {
            return r;
        }
    }
    return {};
}

Result<void> make_private_file(const std::string& path) {
    UniqueFd fd(open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd)
        return make_error(errno, fmt::format("{}: {}", path,
                                             errno == ELOOP ? "a symbolic link" : std::strerror(errno)));
    struct stat st{};
    if (fstat(fd.get(), &st) != 0)
        return make_error(errno, fmt::format("{}: {}", path, std::strerror(errno)));
    if (!S_ISREG(st.st_mode))
        return refuse(path, "not a regular file");
    if (st.st_uid != geteuid())
        return refuse(path, fmt::format("owned by uid {}, not by this user (uid {})", st.st_uid, geteuid()));
    if ((st.st_mode & 0777) != 0600 && fchmod(fd.get(), 0600) != 0)
        return make_error(errno, fmt::format("{}: chmod: {}", path, std::strerror(errno)));
    return {};
}

}  // namespace banyan
