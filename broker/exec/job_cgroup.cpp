#include "broker/exec/job_cgroup.hpp"

#include <csignal>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

namespace banyan {
namespace {

bool write_file(const std::string& path, const std::string& text) {
    std::ofstream out(path);
    out << text;
    out.flush();
    return static_cast<bool>(out);
}

std::vector<pid_t> procs_of(const std::string& dir) {
    std::ifstream in(dir + "/cgroup.procs");
    std::vector<pid_t> out;
    for (pid_t pid; in >> pid;)
        out.push_back(pid);
    return out;
}

}  // namespace

std::optional<std::string> own_unified_cgroup(const std::string& mounts, const std::string& proc_self_cgroup) {
    std::string mount_point;
    std::istringstream m(mounts);
    for (std::string line; std::getline(m, line);) {
        std::istringstream fields(line);
        std::string device, point, type;
        fields >> device >> point >> type;
        if (type == "cgroup2") {
            mount_point = point;
            break;
        }
    }
    if (mount_point.empty())
        return std::nullopt;
    std::istringstream c(proc_self_cgroup);
    for (std::string line; std::getline(c, line);)
        if (line.starts_with("0::"))
            return mount_point + (line.substr(3) == "/" ? "" : line.substr(3));
    return mount_point;
}

Result<JobCgroup> JobCgroup::create(std::string dir) {
    // One that exists is someone else's: never share it (its end would
    // kill what runs in it).
    if (mkdir(dir.c_str(), 0755) != 0)
        return make_error(errno, fmt::format("cgroup {}: {}", dir, std::strerror(errno)));
    int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        rmdir(dir.c_str());
        return make_error(err, fmt::format("cgroup {}: {}", dir, std::strerror(err)));
    }
    return JobCgroup(std::move(dir), fd);
}

JobCgroup::~JobCgroup() {
    if (fd_ >= 0)
        close(fd_);
    if (!dir_.empty())
        try_remove();
}

bool JobCgroup::try_remove() {
    // A killed process leaves the cgroup only once the kernel has reaped
    // it: rmdir answers EBUSY until then.
    if (!kill_all() || rmdir(dir_.c_str()) != 0)
        return false;
    dir_.clear();
    return true;
}

bool JobCgroup::kill_all() {
    if (procs_of(dir_).empty())
        return true;
    if (!write_file(dir_ + "/cgroup.kill", "1"))
        for (pid_t pid : procs_of(dir_))
            kill(pid, SIGKILL);
    return procs_of(dir_).empty();
}

}  // namespace banyan
