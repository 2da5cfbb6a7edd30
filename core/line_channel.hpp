// LineChannel: JSON messages, one per line, over a pair of pipe ends (the
// exec service <-> banyan-shell protocol, doc/spec/shell.md section 3).
// Writes never block (a PipeWriter queues them). Each complete line read is
// handed to on_message; on_close runs once, at end of file or on a read
// error, and is the only callback that may destroy the channel. The channel
// owns both fds.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/message.hpp"
#include "core/pipe_writer.hpp"
#include "core/reactor.hpp"
#include "core/result.hpp"

namespace banyan {

class LineChannel {
  public:
    // Every message fits (twice the largest message payload): what a
    // writer sends without a newline is not kept past it.
    static constexpr size_t kMaxLine = 2 * kDefaultMaxPayload;

    // A line that is not a JSON object reaches on_message as an error
    // (EPROTO); so does, once, a line longer than max_line (EMSGSIZE),
    // which is dropped as it is read, never held whole.
    LineChannel(Reactor& reactor, int read_fd, int write_fd,
                std::function<void(Result<nlohmann::json>)> on_message, std::function<void()> on_close,
                size_t max_line = kMaxLine);
    ~LineChannel();
    LineChannel(const LineChannel&) = delete;
    LineChannel& operator=(const LineChannel&) = delete;

    void send(const nlohmann::json& message) { send_line(line_of(message)); }
    // A message already written as one line (line_of, or built from its parts).
    void send_line(std::string line);
    // A message as one line of JSON, without the newline. As the message
    // codec does: invalid UTF-8 in a string becomes U+FFFD.
    static std::string line_of(const nlohmann::json& message);
    // Writes what is queued, blocking up to a second for room (before exit).
    void flush() { writer_.flush(1000); }
    size_t queued_bytes() const { return writer_.queued_bytes(); }
    // The lines sent and not yet written, taken back (the other end is gone).
    std::deque<std::string> take_unsent() { return writer_.take_unwritten(); }
    // Runs `fn` each time everything sent has been written.
    void on_drained(std::function<void()> fn) { writer_.on_drained(std::move(fn)); }
    // Stops and resumes reading (the other end then blocks once the pipe
    // is full): backpressure. read_available() still reads.
    void pause_reading();
    void resume_reading();
    // Reads and hands on what the pipe holds now (also called by the loop).
    void read_available();

  private:
    void take(std::string_view chunk);
    void handle_line(std::string_view line);
    void deliver(Result<nlohmann::json> message);

    int read_fd_;
    PipeWriter writer_;
    std::function<void(Result<nlohmann::json>)> on_message_;
    std::function<void()> on_close_;
    std::string partial_;
    size_t max_line_;
    bool dropping_ = false;  // within a line over max_line_, until its newline
    Reactor& reactor_;
    std::unique_ptr<FdWatcher> read_watch_;
};

}  // namespace banyan
