// PmixServer: the PMIx server of one shell (OpenPMIx server library,
// doc/spec/shell.md section 4). Registers the job's namespace and this
// shell's tasks, hands each task its PMIx environment, and turns fences and
// aborts into calls the shell answers on its own loop. One per process
// (the PMIx server library is a process-wide singleton).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/reactor.hpp"
#include "core/result.hpp"
#include "shell/shell_job.hpp"

namespace banyan {

class PmixServer {
  public:
    struct Handlers {
        // All local tasks entered fence `seq`; `data` is this shell's part.
        // Answer with fence_done(seq, every shell's data concatenated).
        std::function<void(uint64_t seq, std::string data)> fence;
        // Task `task` called PMIx_Abort (MPI_Abort) with `status`, `message`.
        std::function<void(uint32_t task, int status, std::string message)> abort;
    };

    // `hwloc_topology`: this machine's loaded topology, for the library to
    // share with its clients instead of loading its own (may be null; must
    // outlive the server). Error: the library cannot start (names the PMIx
    // status).
    static Result<std::unique_ptr<PmixServer>> start(Reactor& reactor, const ShellJob& job, void* hwloc_topology,
                                                     Handlers handlers);
    ~PmixServer();

    // The PMIX_* variables task `task` (a global task rank) needs.
    Result<std::vector<std::string>> task_environment(uint32_t task);
    // Completes fence `seq` with the data of all shells.
    void fence_done(uint64_t seq, std::string all_data);

    struct State;  // shared with the library's callbacks

  private:
    PmixServer() = default;
    std::shared_ptr<State> state_;
};

}  // namespace banyan
