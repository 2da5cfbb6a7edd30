// PmiSimpleServer: the shell's server of the simple PMI wire protocol
// (PMI-1, as MPICH, Intel MPI and Cray MPICH's PMI client and Banyan's own
// nested brokers speak it; doc/spec/shell.md §4.2). Each local task gets
// one end of a socket pair as PMI_FD; the server answers its commands on
// the shell's loop. A barrier completes once every local task entered it,
// then through the shell's fence across nodes, which carries the key-value
// pairs the tasks put since the last barrier.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/reactor.hpp"
#include "core/result.hpp"
#include "core/unique_fd.hpp"
#include "shell/shell_job.hpp"

namespace banyan {

class PmiSimpleServer {
  public:
    struct Handlers {
        // Every local task entered the barrier; `data` is this shell's puts
        // since the last one. Answer with barrier_done(every shell's data,
        // concatenated).
        std::function<void(std::string data)> barrier;
        // Task `task` called PMI_Abort.
        std::function<void(uint32_t task, int status, std::string message)> abort;
        // Task `task` broke the protocol (a malformed or unknown command, or
        // it ended inside a PMI session): the job cannot go on.
        std::function<void(uint32_t task, std::string why)> failed;
    };

    PmiSimpleServer(Reactor& reactor, const ShellJob& job, Handlers handlers);
    ~PmiSimpleServer();
    PmiSimpleServer(const PmiSimpleServer&) = delete;
    PmiSimpleServer& operator=(const PmiSimpleServer&) = delete;

    // A connection for task `task`: the returned fd is the task's end (to
    // be placed as its fd 3 and closed here once it is started).
    Result<UniqueFd> connect_task(uint32_t task);
    // PMI_FD, PMI_RANK, PMI_SIZE, PMI_SPAWNED for task `task`.
    std::vector<std::string> task_environment(uint32_t task) const;
    // The task exited: its connection ends (a task that ends between init
    // and finalize is a failure: the others would wait for it forever).
    void task_exited(uint32_t task);
    // Completes the barrier with the data of all shells.
    void barrier_done(const std::string& all_data);

    // The kvs name every task of the job shares.
    const std::string& kvsname() const { return kvsname_; }
    // MPICH's PMI_process_mapping of the task map: "(vector,(0,N,PPN),...)".
    static std::string process_mapping(const TaskMap& map);

  private:
    struct Connection;
    // Reads what the task sent and answers it; false when nothing came.
    bool on_readable(Connection& c);
    void on_line(Connection& c, const std::string& line);
    void reply(Connection& c, const std::string& text);
    void fail(Connection& c, std::string why);
    void close_connection(Connection& c);

    Reactor& reactor_;
    const ShellJob& job_;
    Handlers handlers_;
    std::string kvsname_;
    std::map<uint32_t, std::unique_ptr<Connection>> connections_;  // by task
    std::map<std::string, std::string> kvs_;                       // after the last barrier
    std::map<std::string, std::string> pending_;                   // put since the last barrier
    size_t pending_bytes_ = 0;
    size_t in_barrier_ = 0;  // local tasks in the barrier
};

}  // namespace banyan
