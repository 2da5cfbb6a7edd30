#include "shell/container.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/json_field.hpp"
#include "shell/task.hpp"

namespace banyan {
namespace {

bool is_dir(const std::string& path) {
    struct stat st {};
    return !path.empty() && path.starts_with("/") && stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// What the holder is asked for (shell/container_holder.cpp reads it).
nlohmann::json holder_request(const ShellJob& job) {
    nlohmann::json mounts = nlohmann::json::array(), job_dirs = nlohmann::json::array();
    auto same_path = [&](const std::string& dir) {
        if (is_dir(dir))
            job_dirs.push_back(dir);
    };
    // The job's own directories, where they are outside: its run directory
    // (PMIx's rendezvous), HOME, and where it works.
    same_path(job.tmpdir);
    std::string home = env_value(job.environment, "HOME");
    if (!is_dir(home)) {
        const passwd* pw = getpwuid(getuid());
        home = pw && pw->pw_dir ? pw->pw_dir : "";
    }
    same_path(home);
    same_path(job.cwd);
    for (const auto& m : job.options.container_mounts)
        mounts.push_back({{"source", m.source}, {"destination", m.destination}, {"readonly", m.readonly}});
    const RankChildren& mine = job.R.ranks.at(job.rank);
    std::string cache = job.container_cache;
    if (auto at = cache.find("{uid}"); at != std::string::npos)
        cache.replace(at, 5, std::to_string(getuid()));
    std::string path = env_value(job.environment, "PATH");
    return {{"image", job.options.container_image},
            {"cache", cache},
            {"cache_size", job.container_cache_size},
            {"job_dirs", job_dirs},
            {"mounts", mounts},
            {"devices", gpu_device_files(mine.gpus)},
            {"command", job.command[0]},
            {"cwd", job.cwd},
            {"path", path.empty() ? "/usr/local/bin:/usr/bin:/bin" : path}};
}

}  // namespace

std::vector<std::string> gpu_device_files(const IdSet& gpus, const std::string& dev) {
    std::vector<std::string> files;
    if (gpus.empty())
        return files;
    auto add = [&](const std::string& path) {
        struct stat st {};
        if (stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode))
            files.push_back(path);
    };
    // NVIDIA: one file per GPU and the driver's; AMD and others through
    // the DRM render nodes (and ROCm's kfd).
    for (const char* control : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "kfd"})
        add(fmt::format("{}/{}", dev, control));
    gpus.for_each([&](uint32_t gpu) {
        add(fmt::format("{}/nvidia{}", dev, gpu));
        add(fmt::format("{}/dri/renderD{}", dev, 128 + gpu));
    });
    return files;
}

Result<std::unique_ptr<JobContainers>> JobContainers::start(Reactor& reactor, const ShellJob& job,
                                                            std::function<void(Result<void>)> ready) {
    std::unique_ptr<JobContainers> set(new JobContainers(reactor));
    set->host_ = job.host_of(job.rank);
    set->ready_ = std::move(ready);
    size_t count = job.options.container_per_task ? job.local.ntasks : 1;
    std::string request = LineChannel::line_of(holder_request(job));
    for (size_t i = 0; i < count; i++) {
        int to_holder[2], from_holder[2];
        if (pipe2(to_holder, O_CLOEXEC) != 0)
            return make_error(errno, fmt::format("pipe: {}", std::strerror(errno)));
        if (pipe2(from_holder, O_CLOEXEC) != 0) {
            close(to_holder[0]);
            close(to_holder[1]);
            return make_error(errno, fmt::format("pipe: {}", std::strerror(errno)));
        }
        UniqueFd holder_in(to_holder[0]), holder_out(from_holder[1]);
        auto holder = std::make_unique<Holder>();
        Holder* h = holder.get();
        JobContainers* self = set.get();
        holder->channel = std::make_unique<LineChannel>(
            reactor, from_holder[0], to_holder[1],
            [self, h](Result<nlohmann::json> answer) { self->on_answer(*h, std::move(answer)); },
            [self, h] {
                if (!h->answered)
                    self->fail("its holder ended without an answer (see the broker's log)");
            });
        SpawnOptions spawn{.argv = {"banyan-shell", "--container"},
                           .program = "/proc/self/exe",
                           .stdin_fd = holder_in.get(),
                           .stdout_fd = holder_out.get()};
        auto process = Subprocess::spawn(reactor, spawn, [](int) {});
        if (!process)
            return make_error(process.error().code, fmt::format("container on {}: {}", set->host_,
                                                                process.error().message));
        holder->process = std::move(*process);
        holder->channel->send_line(request);
        set->holders_.push_back(std::move(holder));
    }
    return set;
}

JobContainers::~JobContainers() = default;

void JobContainers::on_answer(Holder& holder, Result<nlohmann::json> answer) {
    if (failed_ || holder.answered)
        return;
    holder.answered = true;
    auto error = answer ? json_field<std::string>(*answer, "error", "", "container") : Result<std::string>(answer.error());
    auto program = answer ? json_field<std::string>(*answer, "program", "", "container") : Result<std::string>("");
    if (!error || !program)
        return fail((!error ? error.error() : program.error()).message);
    if (!error->empty())
        return fail(*error);
    if (program->empty())
        return fail("its holder named no program");
    holder.program = *program;
    // Its namespaces, held from here: the holder may end, the tasks' stay.
    pid_t pid = holder.process->pid();
    if (getuid() != 0) {
        holder.user_ns = UniqueFd(open(fmt::format("/proc/{}/ns/user", pid).c_str(), O_RDONLY | O_CLOEXEC));
        if (!holder.user_ns)
            return fail(fmt::format("its user namespace: {}", std::strerror(errno)));
    }
    holder.mount_ns = UniqueFd(open(fmt::format("/proc/{}/ns/mnt", pid).c_str(), O_RDONLY | O_CLOEXEC));
    if (!holder.mount_ns)
        return fail(fmt::format("its mount namespace: {}", std::strerror(errno)));
    auto lock = json_field<std::string>(*answer, "lock", "", "container");
    if (!lock || lock->empty())
        return fail("its holder named no cache entry");
    holder.image_lock = UniqueFd(open(lock->c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!holder.image_lock || flock(holder.image_lock.get(), LOCK_SH | LOCK_NB) != 0)
        return fail(fmt::format("{}: {}", *lock, std::strerror(errno)));
    if (++answered_ == holders_.size())
        ready_({});
}

void JobContainers::fail(const std::string& why) {
    if (failed_)
        return;
    failed_ = true;
    ready_(make_error(EINVAL, fmt::format("container on {}: {}", host_, why)));
}

void JobContainers::end_holders() {
    for (auto& h : holders_)
        h->process.reset();
}

JobContainers::Joined JobContainers::for_task(uint32_t local_index) const {
    const Holder& h = *holders_[holders_.size() == 1 ? 0 : local_index];
    return {.program = h.program, .user_ns = h.user_ns.get(), .mount_ns = h.mount_ns.get()};
}

}  // namespace banyan
