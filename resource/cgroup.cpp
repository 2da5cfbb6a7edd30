#include "resource/cgroup.hpp"

#include <algorithm>
#include <sstream>
#include <vector>

#include "core/text_file.hpp"

namespace banyan {
namespace {

constexpr uint64_t kV1Unlimited = uint64_t{1} << 62;

std::optional<std::string> read_first_line(const std::string& path) {
    auto text = read_text_file(path);
    if (!text || text->empty())
        return std::nullopt;
    return text->substr(0, text->find('\n'));
}

std::optional<uint64_t> to_u64(const std::string& text) {
    if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 19)
        return std::nullopt;
    return std::stoull(text);
}

// The cgroup directory and each ancestor up to the mount root, deepest first.
// A path that does not exist under the root (a cgroup namespace hides it)
// is read at the root itself.
std::vector<std::string> dirs_upward(const std::string& mount, std::string path) {
    std::vector<std::string> dirs;
    while (!path.empty() && path != "/") {
        dirs.push_back(mount + path);
        path = path.substr(0, path.rfind('/'));
    }
    dirs.push_back(mount);
    return dirs;
}

void keep_min(std::optional<uint64_t>& current, uint64_t value) {
    current = current ? std::min(*current, value) : value;
}

std::optional<uint32_t> cores_from(std::optional<uint64_t> quota_fraction_x1000) {
    if (!quota_fraction_x1000)
        return std::nullopt;
    return static_cast<uint32_t>(std::max<uint64_t>(1, *quota_fraction_x1000 / 1000));
}

CgroupLimits read_v2(const std::string& root, const std::string& path) {
    CgroupLimits limits{.version = "v2"};
    std::optional<uint64_t> cores_x1000;
    std::optional<uint64_t> memory;
    for (const auto& dir : dirs_upward(root, path)) {
        if (auto line = read_first_line(dir + "/cpu.max")) {
            std::istringstream in(*line);
            std::string quota, period;
            in >> quota >> period;
            auto q = to_u64(quota);
            auto p = to_u64(period);
            if (q && p && *p > 0)
                keep_min(cores_x1000, *q * 1000 / *p);
        }
        if (auto line = read_first_line(dir + "/memory.max"))
            if (auto m = to_u64(*line))
                keep_min(memory, *m);
    }
    limits.max_cores = cores_from(cores_x1000);
    limits.max_memory = memory;
    return limits;
}

CgroupLimits read_v1(const std::string& root, const std::string& cpu_path, const std::string& memory_path,
                     const std::string& cpu_mount, const std::string& memory_mount) {
    CgroupLimits limits{.version = "v1"};
    std::optional<uint64_t> cores_x1000;
    std::optional<uint64_t> memory;
    if (!cpu_mount.empty()) {
        for (const auto& dir : dirs_upward(root + "/" + cpu_mount, cpu_path)) {
            auto quota = read_first_line(dir + "/cpu.cfs_quota_us");
            auto period = read_first_line(dir + "/cpu.cfs_period_us");
            if (!quota || !period)
                continue;
            auto q = to_u64(*quota);  // "-1" (no limit) does not parse
            auto p = to_u64(*period);
            if (q && p && *p > 0)
                keep_min(cores_x1000, *q * 1000 / *p);
        }
    }
    if (!memory_mount.empty()) {
        for (const auto& dir : dirs_upward(root + "/" + memory_mount, memory_path)) {
            if (auto line = read_first_line(dir + "/memory.limit_in_bytes"))
                if (auto m = to_u64(*line); m && *m < kV1Unlimited)
                    keep_min(memory, *m);
        }
    }
    limits.max_cores = cores_from(cores_x1000);
    limits.max_memory = memory;
    return limits;
}

}  // namespace

CgroupLimits read_cgroup_limits(const std::string& proc_self_cgroup, const std::string& root) {
    std::istringstream in(proc_self_cgroup);
    std::string line;
    std::string v2_path;
    std::string cpu_path, memory_path, cpu_mount, memory_mount;
    bool have_v2 = false;
    while (std::getline(in, line)) {
        // "ID:CONTROLLERS:PATH"
        size_t a = line.find(':');
        size_t b = a == std::string::npos ? a : line.find(':', a + 1);
        if (b == std::string::npos)
            continue;
        std::string id = line.substr(0, a);
        std::string controllers = line.substr(a + 1, b - a - 1);
        std::string path = line.substr(b + 1);
        if (id == "0" && controllers.empty()) {
            have_v2 = true;
            v2_path = path;
            continue;
        }
        std::istringstream names(controllers);
        std::string name;
        while (std::getline(names, name, ',')) {
            if (name == "cpu") {
                cpu_path = path;
                cpu_mount = controllers;
            } else if (name == "memory") {
                memory_path = path;
                memory_mount = controllers;
            }
        }
    }
    if (!cpu_mount.empty() || !memory_mount.empty())
        return read_v1(root, cpu_path, memory_path, cpu_mount, memory_mount);
    if (have_v2)
        return read_v2(root, v2_path);
    return CgroupLimits{.version = "none"};
}

CgroupLimits read_own_cgroup_limits() {
    return read_cgroup_limits(read_text_file("/proc/self/cgroup").value_or(""), "/sys/fs/cgroup");
}

}  // namespace banyan
