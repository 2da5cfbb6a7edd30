// SocketRelay: passes bytes both ways between two connected stream
// sockets until either side ends; the other side then gets what was still
// queued for it, and both close. Never blocks the loop: a side whose peer
// does not read is not read further until the peer catches up.
#pragma once

#include <memory>

#include "core/pipe_writer.hpp"
#include "core/reactor.hpp"
#include "core/unique_fd.hpp"

namespace banyan {

class SocketRelay {
  public:
    // `a` and `b`: connected sockets (owned), made non-blocking here.
    SocketRelay(Reactor& reactor, UniqueFd a, UniqueFd b);
    SocketRelay(const SocketRelay&) = delete;
    SocketRelay& operator=(const SocketRelay&) = delete;
    bool open() const { return open_; }
    // Ended, and what was queued for either side written (or dropped: the
    // side was gone): nothing more to do.
    bool done() const { return !open_ && a_.writer->queued_bytes() == 0 && b_.writer->queued_bytes() == 0; }

  private:
    struct Side {
        UniqueFd fd;                         // read here
        std::unique_ptr<FdWatcher> watch;    // while reading
        std::unique_ptr<PipeWriter> writer;  // writes to this side (a dup of fd)
    };
    void watch(Side& from, Side& to);
    void on_readable(Side& from, Side& to);
    void end();

    Reactor& reactor_;
    Side a_, b_;
    bool open_ = true;
};

}  // namespace banyan
