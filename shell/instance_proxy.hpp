// InstanceProxy: passes requests from outside a job to the nested instance
// the job runs (doc/spec/instances.md §5), from the shell of the job's
// first rank, as the job's user, and hands back each answer. One
// connection to the instance's socket, opened at the first request and
// again after it closes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/message.hpp"
#include "core/pipe_writer.hpp"
#include "core/reactor.hpp"
#include "core/unique_fd.hpp"

namespace banyan {

class InstanceProxy {
  public:
    // `answer(tag, answer)`: {payload} or {errnum, errstr}, once per request.
    InstanceProxy(Reactor& reactor, std::function<void(uint64_t tag, nlohmann::json answer)> answer);
    ~InstanceProxy();

    // `request`: {topic, payload, nodeid?} for the instance at `uri`
    // (local:///PATH). A request that cannot be sent is answered at once.
    void forward(uint64_t tag, const std::string& uri, const nlohmann::json& request);
    // Answers every request still waiting with ECONNRESET (the job ends).
    void close_all(const std::string& why);

  private:
    void on_readable();
    void answer_error(uint64_t tag, int errnum, const std::string& text);

    Reactor& reactor_;
    std::function<void(uint64_t, nlohmann::json)> answer_;
    std::string uri_;
    UniqueFd fd_;
    std::unique_ptr<FdWatcher> watch_;
    std::unique_ptr<PipeWriter> writer_;
    StreamDecoder decoder_;
    uint32_t next_matchtag_ = 1;
    std::map<uint32_t, uint64_t> waiting_;  // matchtag -> tag
};

}  // namespace banyan
