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

    // {"op": OP, "job": ID, ...}: `answer` gets `data`, or the error: on
    // the loop, except for a link that has failed, which answers inside
    // this call.
    void ask(nlohmann::json request, Answer answer);
    // False once it has exited, failed to start or been given up on: the
    // next job starts another.
    bool usable() const { return !failed_; }
    // Stops using it (stuck): what it owes is answered with `why`, and it
    // exits at the end of its stdin, when this link is destroyed.
    void give_up(const std::string& why) { fail(why); }

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
