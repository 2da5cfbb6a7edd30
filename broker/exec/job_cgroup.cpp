#include "broker/exec/job_cgroup.hpp"

#include <algorithm>
#include <csignal>
#include <cstring>
#include <sstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/idset.hpp"
#include "core/text_file.hpp"
#include "core/unique_fd.hpp"

namespace banyan {
namespace {

// A cgroup's file, written whole in one write (never created: a file the
// kernel does not offer, as cgroup.kill on v1, is false).
bool write_file(const std::string& path, const std::string& text) {
    UniqueFd fd(open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC));
    return fd && write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size());
}

std::vector<pid_t> procs_of(const std::string& dir) {
    return read_pid_list(dir + "/cgroup.procs");
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

std::optional<std::string> own_v1_memory_cgroup(const std::string& mounts, const std::string& proc_self_cgroup) {
    // The mount: type cgroup, with "memory" among its options.
    std::string mount_point;
    std::istringstream m(mounts);
    for (std::string line; mount_point.empty() && std::getline(m, line);) {
        std::istringstream fields(line);
        std::string device, point, type, options;
        fields >> device >> point >> type >> options;
        if (type != "cgroup")
            continue;
        std::istringstream opts(options);
        for (std::string opt; std::getline(opts, opt, ',');)
            if (opt == "memory")
                mount_point = point;
    }
    if (mount_point.empty())
        return std::nullopt;
    // The line "N:CONTROLLERS:PATH" whose controllers include memory.
    std::istringstream c(proc_self_cgroup);
    for (std::string line; std::getline(c, line);) {
        size_t first = line.find(':'), second = first == std::string::npos ? first : line.find(':', first + 1);
        if (second == std::string::npos)
            continue;
        std::istringstream controllers(line.substr(first + 1, second - first - 1));
        for (std::string name; std::getline(controllers, name, ',');)
            if (name == "memory") {
                std::string path = line.substr(second + 1);
                return mount_point + (path == "/" ? "" : path);
            }
    }
    return mount_point;
}

bool is_job_cgroup_name(std::string_view name, uint32_t rank, std::string_view jobid) {
    auto decimal = [](std::string_view digits) {
        return !digits.empty() && digits.size() <= 20 &&
               std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    std::string head = fmt::format("banyan-{}-", rank);
    if (!name.starts_with(head))
        return false;
    name.remove_prefix(head.size());
    size_t dash = name.find('-');
    if (dash == std::string_view::npos || !decimal(name.substr(0, dash)))
        return false;
    name.remove_prefix(dash + 1);
    return name.starts_with(jobid) && name.size() > jobid.size() && name[jobid.size()] == '.' &&
           decimal(name.substr(jobid.size() + 1));
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

Result<JobCgroup> JobCgroup::open_existing(std::string dir) {
    int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return make_error(errno, fmt::format("cgroup {}: {}", dir, std::strerror(errno)));
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
    std::vector<pid_t> procs = procs_of(dir_);
    if (procs.empty())
        return true;
    // One forked since the list was read is killed at the next try (the
    // caller retries until the cgroup is empty); cgroup.kill (v2) misses none.
    if (!write_file(dir_ + "/cgroup.kill", "1"))
        for (pid_t pid : procs)
            kill(pid, SIGKILL);
    return procs_of(dir_).empty();
}


Result<void> JobCgroup::limit_memory(uint64_t bytes) {
    std::string text = std::to_string(bytes);
    if (access((dir_ + "/memory.max").c_str(), F_OK) == 0) {
        if (!write_file(dir_ + "/memory.max", text))
            return make_error(EIO, fmt::format("{}/memory.max: cannot write {}", dir_, text));
        // No swap either: a job over its limit ends rather than swaps.
        if (access((dir_ + "/memory.swap.max").c_str(), F_OK) == 0 && !write_file(dir_ + "/memory.swap.max", "0"))
            return make_error(EIO, fmt::format("{}/memory.swap.max: cannot write 0", dir_));
        return {};
    }
    if (access((dir_ + "/memory.limit_in_bytes").c_str(), F_OK) != 0)
        return make_error(ENOENT, fmt::format("{}: no memory controller (no memory.max or memory.limit_in_bytes)", dir_));
    if (!write_file(dir_ + "/memory.limit_in_bytes", text))
        return make_error(EIO, fmt::format("{}/memory.limit_in_bytes: cannot write {}", dir_, text));
    // Memory and swap together: otherwise a job over its limit swaps
    // instead of ending. (The file exists only where swap is counted.)
    if (access((dir_ + "/memory.memsw.limit_in_bytes").c_str(), F_OK) == 0 &&
        !write_file(dir_ + "/memory.memsw.limit_in_bytes", text))
        return make_error(EIO, fmt::format("{}/memory.memsw.limit_in_bytes: cannot write {}", dir_, text));
    return {};
}

std::optional<uint64_t> JobCgroup::memory_limit() const {
    // v1 says "no limit" with the largest page count it keeps, 2^63 less a
    // page; v2 with "max", which is no number.
    constexpr uint64_t kUnlimited = uint64_t{1} << 62;
    for (const char* file : {"/memory.max", "/memory.limit_in_bytes"}) {
        auto text = read_text_file(dir_ + file);
        if (!text)
            continue;
        std::string_view value = *text;
        if (value.ends_with('\n'))
            value.remove_suffix(1);
        auto bytes = parse_decimal(value, UINT64_MAX, file + 1);
        if (bytes && *bytes < kUnlimited)
            return *bytes;
        return std::nullopt;
    }
    return std::nullopt;
}

uint64_t JobCgroup::oom_kills() const {
    for (const char* file : {"/memory.events", "/memory.oom_control"}) {
        auto text = read_text_file(dir_ + file);
        if (!text)
            continue;
        std::istringstream in(*text);
        std::string key;
        uint64_t value = 0;
        while (in >> key >> value)
            if (key == "oom_kill")
                return value;
    }
    return 0;
}

}  // namespace banyan
