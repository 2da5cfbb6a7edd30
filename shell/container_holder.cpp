#include "shell/container_holder.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/json_field.hpp"
#include "core/json_parse.hpp"
#include "shell/image_cache.hpp"
#include "shell/task.hpp"

namespace banyan {
namespace {

struct Bind {
    std::string source, destination;
    bool readonly = false;
    bool recursive = true;
};

Error failed(const std::string& what) {
    return make_error(errno, fmt::format("{}: {}", what, std::strerror(errno)));
}

Result<void> write_file(const std::string& path, const std::string& text) {
    int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return failed(path);
    bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    int err = errno;
    close(fd);
    errno = err;
    return ok ? Result<void>() : failed(path);
}

// The user namespace (unless root) and mount namespace of the container.
// The job's user stays who it is inside: its uid and gid map to
// themselves, and its supplementary groups stay as they are (shown as
// nogroup inside; they still open what they open outside).
Result<void> enter_namespaces() {
    uid_t uid = getuid();
    gid_t gid = getgid();
    if (uid == 0) {
        if (unshare(CLONE_NEWNS) != 0)
            return failed("unshare(mount namespace)");
    } else {
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0)
            return make_error(errno, fmt::format("this node cannot make a user namespace ({}): containers of users "
                                                 "other than root need them (sysctl user.max_user_namespaces)",
                                                 std::strerror(errno)));
        auto a = write_file("/proc/self/setgroups", "deny");
        auto b = a ? write_file("/proc/self/uid_map", fmt::format("{} {} 1\n", uid, uid)) : a;
        auto c = b ? write_file("/proc/self/gid_map", fmt::format("{} {} 1\n", gid, gid)) : b;
        if (!c)  // (a security module restricting user namespaces, as AppArmor can)
            return make_error(c.error().code, fmt::format("this node does not let a user namespace map its user "
                                                          "({}): containers of users other than root need that",
                                                          c.error().message));
    }
    // Nothing mounted here reaches the host.
    if (mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0)
        return failed("making / a slave mount");
    return {};
}

// Makes the mount point for `source` at `target` (resolved in the root:
// no link in it): a directory, or an empty file for a file (the image's
// own stays underneath, unchanged).
Result<void> make_mount_point(const std::string& source, const std::string& target) {
    struct stat st {};
    if (stat(source.c_str(), &st) != 0)
        return failed(source);
    std::error_code ec;
    if (S_ISDIR(st.st_mode)) {
        std::filesystem::create_directories(target, ec);
        if (ec)
            return make_error(ec.value(), fmt::format("cannot make {} in the image: {}", target, ec.message()));
        return {};
    }
    std::filesystem::create_directories(std::filesystem::path(target).parent_path(), ec);
    int fd = open(target.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EISDIR)
        return make_error(errno, fmt::format("cannot make {} in the image: {}", target, std::strerror(errno)));
    if (fd >= 0)
        close(fd);
    return {};
}

// Read-only again, keeping the flags the kernel keeps locked on a mount
// made in a user namespace: nosuid, nodev, noexec and the atime ones as
// they were (a remount that changes one is refused).
Result<void> remount_readonly(const std::string& target) {
    struct statvfs sv {};
    unsigned long flags = MS_BIND | MS_REMOUNT | MS_RDONLY;
    if (statvfs(target.c_str(), &sv) == 0) {
        for (auto [st, ms] : {std::pair{ST_NOSUID, MS_NOSUID}, {ST_NODEV, MS_NODEV}, {ST_NOEXEC, MS_NOEXEC},
                              {ST_NOATIME, MS_NOATIME}, {ST_NODIRATIME, MS_NODIRATIME}, {ST_RELATIME, MS_RELATIME}})
            if (sv.f_flag & st)
                flags |= ms;
        if (!(sv.f_flag & (ST_NOATIME | ST_RELATIME)))
            flags |= MS_STRICTATIME;
    }
    if (mount(nullptr, target.c_str(), nullptr, flags, nullptr) != 0)
        return failed("read-only " + target);
    return {};
}

// Binds b.source on b.destination as the container sees it: the path is
// resolved in the image (its links followed inside it, never on the host).
Result<void> bind(const std::string& root, const Bind& b) {
    auto target = resolve_in_root(root, b.destination);
    if (!target)
        return target.error();
    if (auto r = make_mount_point(b.source, *target); !r)
        return r;
    if (mount(b.source.c_str(), target->c_str(), nullptr, MS_BIND | (b.recursive ? MS_REC : 0), nullptr) != 0)
        return make_error(errno, fmt::format("cannot bind {} on {}: {}", b.source, b.destination, std::strerror(errno)));
    return b.readonly ? remount_readonly(*target) : Result<void>();
}

// /dev of its own: a tmpfs with the usual character devices, the host's
// terminals, shared memory and message queues, the fabrics' devices (MPI
// over InfiniBand, Omni-Path, Slingshot) and the job's GPUs only.
Result<void> make_dev(const std::string& root, const std::vector<std::string>& devices) {
    auto dev = resolve_in_root(root, "/dev");
    if (!dev)
        return dev.error();
    std::error_code ec;
    std::filesystem::create_directories(*dev, ec);
    if (mount("tmpfs", dev->c_str(), "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=1m") != 0)
        return failed("tmpfs on /dev");
    std::vector<Bind> binds;
    for (const char* name : {"null", "zero", "full", "random", "urandom", "tty"})
        binds.push_back({fmt::format("/dev/{}", name), fmt::format("/dev/{}", name), false, false});
    std::vector<std::string> trees = {"pts", "shm", "mqueue", "infiniband"};
    if (!devices.empty())
        trees.push_back("nvidia-caps");  // MIG
    for (const auto& name : trees)
        if (access(("/dev/" + name).c_str(), F_OK) == 0)
            binds.push_back({"/dev/" + name, "/dev/" + name, false, true});
    for (auto it = std::filesystem::directory_iterator("/dev", ec); !ec && it != std::filesystem::directory_iterator();
         it.increment(ec)) {
        std::string name = it->path().filename().string();
        if (name.starts_with("hfi1_") || name.starts_with("cxi"))
            binds.push_back({"/dev/" + name, "/dev/" + name, false, false});
    }
    for (const auto& d : devices)
        binds.push_back({d, d, false, false});
    for (const auto& b : binds)
        if (auto r = bind(root, b); !r)
            return r;
    for (auto [from, to] : {std::pair{"/proc/self/fd", "fd"}, {"/proc/self/fd/0", "stdin"},
                            {"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"}, {"pts/ptmx", "ptmx"}})
        if (symlink(from, (*dev + "/" + to).c_str()) != 0)
            return failed("/dev/" + std::string(to));
    return {};
}

// The image as the root: every other mount under it first (its own /dev,
// then the binds, which may go under /dev), then the root read-only, then
// pivot_root (the host's tree goes).
Result<void> make_root(const std::string& root, const std::vector<Bind>& binds, const std::vector<std::string>& devices) {
    if (mount(root.c_str(), root.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
        return failed("binding the image's root");
    if (auto r = make_dev(root, devices); !r)
        return r;
    for (const auto& b : binds)
        if (auto r = bind(root, b); !r)
            return r;
    if (auto r = remount_readonly(root); !r)
        return r;
    if (chdir(root.c_str()) != 0 || syscall(SYS_pivot_root, ".", ".") != 0)
        return failed("pivot_root");
    if (umount2(".", MNT_DETACH) != 0 || chdir("/") != 0)
        return failed("detaching the host's root");
    return {};
}

// COMMAND as the task will find it from `cwd` with PATH `path`, inside.
Result<std::string> find_command(const std::string& command, const std::string& cwd, const std::string& path) {
    if (!cwd.empty() && chdir(cwd.c_str()) != 0)
        return failed("the working directory " + cwd);
    std::string found = resolve_command(command, path);
    struct stat st {};
    if (stat(found.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(found.c_str(), X_OK) == 0)
        return found;
    if (command.find('/') != std::string::npos)
        return make_error(ENOENT, fmt::format("{}: not an executable file in the container", command));
    return make_error(ENOENT, fmt::format("{}: not found in the container (PATH={})", command, path));
}

Result<std::string> make_container(const nlohmann::json& spec, PreparedImage& image) {
    auto name = json_field<std::string>(spec, "image", "", "container");
    auto cache = json_field<std::string>(spec, "cache", "", "container");
    auto bound = json_field<uint64_t>(spec, "cache_size", 0, "container");
    auto command = json_field<std::string>(spec, "command", "", "container");
    auto cwd = json_field<std::string>(spec, "cwd", "", "container");
    auto path = json_field<std::string>(spec, "path", "/usr/local/bin:/usr/bin:/bin", "container");
    if (auto e = first_error(name, cache, bound, command, cwd, path))
        return *e;
    std::vector<Bind> binds = {{"/proc", "/proc"}, {"/sys", "/sys"}, {"/tmp", "/tmp"}};
    // Who is who, and the host's names: the job's user as outside.
    for (const char* file : {"/etc/passwd", "/etc/group", "/etc/hosts", "/etc/resolv.conf"})
        if (access(file, R_OK) == 0)
            binds.push_back({file, file, true, false});
    // The job's own directories at their paths, unless one is "/" (the
    // image would be gone) or lies in one bound already (a cwd in HOME,
    // a run directory in /tmp): the host's tree is there as it is.
    auto inside_one_bound = [&binds](const std::string& dir) {
        return dir == "/" || std::any_of(binds.begin(), binds.end(), [&dir](const Bind& b) {
                   return b.source == b.destination && b.recursive &&
                          (dir == b.destination || dir.starts_with(b.destination + "/"));
               });
    };
    for (const auto& d : json_array_at(spec, "job_dirs"))
        if (auto dir = json_as<std::string>(d, "job directory"); dir && !inside_one_bound(*dir))
            binds.push_back({*dir, *dir});
    for (const auto& m : json_array_at(spec, "mounts")) {
        auto source = json_field<std::string>(m, "source", "", "mount");
        auto destination = json_field<std::string>(m, "destination", "", "mount");
        auto readonly = json_field<bool>(m, "readonly", false, "mount");
        if (auto e = first_error(source, destination, readonly))
            return *e;
        binds.push_back({*source, *destination, *readonly});
    }
    std::vector<std::string> devices;
    for (const auto& d : json_array_at(spec, "devices"))
        if (auto device = json_as<std::string>(d, "device"))
            devices.push_back(*device);
    auto prepared = prepare_image(*name, *cache, *bound);
    if (!prepared)
        return prepared.error();
    image = std::move(*prepared);
    if (auto r = enter_namespaces(); !r)
        return r.error();
    if (auto r = make_root(image.rootfs, binds, devices); !r)
        return r.error();
    return find_command(*command, *cwd, *path);
}

}  // namespace

int run_container_holder() {
    std::string line;
    char c;
    ssize_t n;
    while ((n = read(0, &c, 1)) == 1 && c != '\n')
        line += c;
    auto spec = parse_json(line);
    PreparedImage image;
    Result<std::string> program = spec && spec->is_object() ? make_container(*spec, image)
                                                            : Result<std::string>(make_error(EPROTO, "a bad request"));
    // The cache entry's lock, which the shell holds too (shell/container.hpp).
    std::string lock = std::filesystem::path(image.rootfs).parent_path().string() + ".lock";
    nlohmann::json answer = program ? nlohmann::json{{"program", *program}, {"lock", lock}}
                                    : nlohmann::json{{"error", program.error().message}};
    std::string text = answer.dump() + "\n";
    if (write(1, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
        return 1;
    if (!program)
        return 1;
    // Held until the shell lets go: its tasks join these namespaces.
    while ((n = read(0, &c, 1)) != 0)
        if (n < 0 && errno != EINTR)
            break;
    return 0;
}

}  // namespace banyan
