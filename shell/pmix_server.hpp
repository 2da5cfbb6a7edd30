// PmixServer: the PMIx server of one shell (OpenPMIx server library,
// doc/spec/shell.md section 4.3). Gives each task its PMIx environment,
// pointing at a loopback port of the shell's own; the library starts when
// a task first connects there (most jobs never do), registers the job's
// namespace and this shell's tasks, and from then on every connection is
// relayed to it. Fences and aborts become calls the shell answers on its
// own loop. One per process (the library is a process-wide singleton).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/reactor.hpp"
#include "core/result.hpp"
#include "core/unique_fd.hpp"
#include "shell/shell_job.hpp"
#include "shell/socket_relay.hpp"

namespace banyan {

class PmixServer {
  public:
    struct Handlers {
        // All local tasks entered fence `seq`; `data` is this shell's part.
        // Answer with fence_done(seq, every shell's data concatenated).
        std::function<void(uint64_t seq, std::string data)> fence;
        // Task `task` called PMIx_Abort (MPI_Abort) with `status`, `message`.
        std::function<void(uint32_t task, int status, std::string message)> abort;
        // The library could not start when a task first connected (once).
        std::function<void(std::string why)> failed;
    };

    // Opens the tasks' port. `job` and `hwloc_topology` (this machine's
    // loaded topology, for the library to share with its clients instead of
    // loading its own; may be null) must outlive the server. Error: no port,
    // or no library version to give the tasks.
    static Result<std::unique_ptr<PmixServer>> open(Reactor& reactor, const ShellJob& job, void* hwloc_topology,
                                                    Handlers handlers);
    ~PmixServer();

    // The PMIX_* (and OMPI_MCA_*) variables task `task` (a global task
    // rank) needs.
    std::vector<std::string> task_environment(uint32_t task) const;
    // Completes fence `seq` with the data of all shells.
    void fence_done(uint64_t seq, std::string all_data);

    struct State;  // shared with the library's callbacks

  private:
    PmixServer(Reactor& reactor, const ShellJob& job, void* hwloc_topology)
        : reactor_(reactor), job_(job), hwloc_topology_(hwloc_topology), retry_accept_(reactor) {}
    void on_task_connecting();
    // Starts the library and registers the job (blocking the shell's loop
    // meanwhile, ~10 ms: output waits, signals wait); the environment the
    // library gives the first local task.
    Result<std::vector<std::string>> start_library();
    // Logs each variable of `library` (the library's environment for the
    // first local task) that the shell gave otherwise or not at all.
    void check_environment(const std::vector<std::string>& library);

    Reactor& reactor_;
    const ShellJob& job_;
    void* hwloc_topology_;
    std::string nspace_;        // the job's: banyan.ID
    bool shared_host_ = false;  // another shell of the job runs on this host
    std::string version_;  // the library's, for PMIX_VERSION
    std::string hostname_;
    UniqueFd listen_fd_;
    uint16_t port_ = 0;  // the tasks'
    std::unique_ptr<FdWatcher> accept_watch_;
    Timer retry_accept_;                    // out of fds: accept again later
    std::optional<uint16_t> library_port_;  // once started
    bool library_failed_ = false;
    std::vector<std::unique_ptr<SocketRelay>> relays_;
    std::shared_ptr<State> state_;
};

// True once a PmixServer's destruction gave up waiting for the library's
// finalize (it never returned): the shell must then end with _exit, since
// the library's own exit-time clean-up could block as its finalize did.
bool pmix_finalize_abandoned();

}  // namespace banyan
