// ProfilerLink: the exec service's end of banyan-profiler (doc/spec/
// profiling.md §2): started at the node's first profiled job, as root
// (directly, or through `banyan-imp profiler`), and asked in JSON lines.
// Answers come on the loop, in the order asked; nothing waits for them.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/line_channel.hpp"
#include "core/reactor.hpp"
#include "core/result.hpp"

namespace banyan {

class ProfilerLink {
  public:
    using Answer = std::function<void(Result<nlohmann::json>)>;
    // `argv`: the profiler, or banyan-imp and "profiler". A start that
    // fails answers every request with why.
    ProfilerLink(Reactor& reactor, std::vector<std::string> argv);
    ~ProfilerLink();

    // {"op": OP, "job": ID, ...}: `answer` gets `data`, or the error.
    void ask(nlohmann::json request, Answer answer);
    // False once it has exited or failed to start: the next job starts another.
    bool usable() const { return !failed_; }

  private:
    void on_line(Result<nlohmann::json> line);
    void fail(const std::string& why);

    Reactor& reactor_;
    std::unique_ptr<Subprocess> proc_;
    std::unique_ptr<LineChannel> channel_;
    bool ready_ = false;
    std::optional<std::string> failed_;
    std::deque<std::pair<nlohmann::json, Answer>> waiting_;  // sent once it is ready
    std::deque<Answer> asked_;                                // sent, in order
};

}  // namespace banyan
