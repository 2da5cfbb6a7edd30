// JobContainers: the containers a job's tasks run in on this node
// (--container, doc/spec/shell.md §9): one holder process per container
// (banyan-shell --container, shell/container_holder.hpp), one for the
// node or, with -o container-per-task, one per local task; a task joins
// its container's namespaces as it starts (SpawnOptions).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/line_channel.hpp"
#include "core/reactor.hpp"
#include "core/result.hpp"
#include "core/unique_fd.hpp"
#include "shell/shell_job.hpp"

namespace banyan {

class JobContainers {
  public:
    // What a task needs to start inside one.
    struct Joined {
        std::string program;  // the command, as the container's PATH finds it
        int user_ns = -1;     // -1: none (the shell runs as root)
        int mount_ns = -1;
    };
    // Starts the holders. `ready` runs once, on the loop: when every holder
    // has made its container, or with the first one's error ("container
    // on HOST: image ...: why").
    static Result<std::unique_ptr<JobContainers>> start(Reactor& reactor, const ShellJob& job,
                                                        std::function<void(Result<void>)> ready);
    ~JobContainers();
    bool ready() const { return answered_ == holders_.size() && !failed_; }
    // The container of local task `local_index`.
    Joined for_task(uint32_t local_index) const;
    // Kills and reaps the holders (the job is ending): their Subprocess
    // does it, knowing their pids are theirs until then. The tasks'
    // namespaces stay while the tasks do.
    void end_holders();

  private:
    struct Holder {
        std::unique_ptr<Subprocess> process;
        std::unique_ptr<LineChannel> channel;  // holds its stdin open: it lives while this does
        std::string program;
        UniqueFd user_ns, mount_ns;
        // The image's cache entry, held shared as the holder holds it: no
        // eviction removes it under the tasks, even if the holder dies.
        UniqueFd image_lock;
        bool answered = false;
    };
    JobContainers(Reactor& reactor) : reactor_(reactor) {}
    void on_answer(Holder& holder, Result<nlohmann::json> answer);
    void fail(const std::string& why);

    Reactor& reactor_;
    std::string host_;
    std::vector<std::unique_ptr<Holder>> holders_;
    size_t answered_ = 0;
    bool failed_ = false;
    std::function<void(Result<void>)> ready_;
};

// The device files of the GPUs `gpus` (this node's indices), and the
// control files of their driver, that exist on this node.
std::vector<std::string> gpu_device_files(const IdSet& gpus, const std::string& dev = "/dev");

}  // namespace banyan
