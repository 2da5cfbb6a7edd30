// PipeWriter: writes bytes to a non-blocking fd without ever blocking the
// loop: what the fd cannot take now waits in a queue and goes when it is
// writable. Owns the fd.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "core/reactor.hpp"

namespace banyan {

class PipeWriter {
  public:
    PipeWriter(Reactor& reactor, int fd);
    ~PipeWriter();
    PipeWriter(const PipeWriter&) = delete;
    PipeWriter& operator=(const PipeWriter&) = delete;

    // Queues `bytes`. Dropped once the reader is gone (EPIPE) or after close().
    void write(std::string bytes);
    // Closes the fd once everything queued is written.
    void close();
    // Writes what is queued, waiting up to `timeout_ms` for room.
    void flush(int timeout_ms);
    size_t queued_bytes() const { return queued_bytes_; }
    // What is queued and not yet written in full, taken out of the queue (a
    // chunk written in part comes whole).
    std::deque<std::string> take_unwritten();
    // Runs `fn` each time the queue empties (a paused producer may go on).
    void on_drained(std::function<void()> fn) { on_drained_ = std::move(fn); }

  private:
    void on_writable();

    Reactor& reactor_;
    int fd_;
    std::deque<std::string> queue_;
    size_t queued_bytes_ = 0;
    size_t written_ = 0;  // of queue_.front()
    bool closing_ = false;
    std::unique_ptr<FdWatcher> watch_;
    std::function<void()> on_drained_;
};

}  // namespace banyan
