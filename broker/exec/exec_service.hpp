// ExecService: runs the tasks of a job's share on this rank (doc/spec/jobs.md
// §8): exec.run starts them and is answered with the highest exit code once
// they have all exited; exec.kill signals them. Task output goes to rank 0
// (job-manager.output) or to the files the jobspec names. A jobspec with
// attributes.system.exec.test.run_duration is simulated: nothing is spawned.
#pragma once

#include <map>
#include <memory>

#include "broker/broker.hpp"
#include "core/jobid.hpp"

namespace banyan {

class ExecService {
  public:
    static std::unique_ptr<ExecService> start(Broker& broker);
    ~ExecService();

  private:
    struct Task;
    struct LocalJob;

    explicit ExecService(Broker& broker);
    void on_run(const Message& req);
    void on_kill(const Message& req);
    Result<void> spawn_tasks(JobId id, LocalJob& job, const nlohmann::json& spec, uint32_t first, uint32_t count,
                             uint32_t size, uint32_t nnodes);
    void on_task_exit(JobId id, Task& task, int wait_status);
    void read_output(JobId id, Task& task, bool is_stderr);
    void forward_output(JobId id, const char* stream, std::string data);
    void finish(JobId id);

    Broker& broker_;
    std::map<JobId, std::unique_ptr<LocalJob>> jobs_;
};

}  // namespace banyan
