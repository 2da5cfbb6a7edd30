// PmiClient: the simple PMI wire protocol (PMI-1, doc/spec/shell.md §4.2)
// from the client's side, for a nested instance's brokers to bootstrap
// through the shell of the job they are (doc/spec/instances.md §2). It
// blocks: it runs before the broker's event loop starts, never on it.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/result.hpp"
#include "core/unique_fd.hpp"

namespace banyan {

class PmiClient {
  public:
    // From PMI_FD, PMI_RANK and PMI_SIZE; then init and get_my_kvsname.
    // Error: not under a PMI-1 server, or its answer.
    static Result<PmiClient> connect();

    uint32_t rank() const { return rank_; }
    uint32_t size() const { return size_; }
    Result<void> put(const std::string& key, const std::string& value);
    Result<void> barrier();
    Result<std::string> get(const std::string& key);
    // Finalizes, closes PMI_FD and removes PMI_* from the environment.
    Result<void> finalize();
    // Ends the job: the shell raises an `abort` exception with `message`.
    void abort(int status, const std::string& message);

  private:
    PmiClient() = default;
    // Sends `command` and reads one answer; error unless it is `expect`
    // with rc=0. The answer's words as KEY -> VALUE.
    Result<std::map<std::string, std::string>> call(const std::string& command, const std::string& expect);

    UniqueFd fd_;
    uint32_t rank_ = 0;
    uint32_t size_ = 1;
    std::string kvsname_;
};

}  // namespace banyan
