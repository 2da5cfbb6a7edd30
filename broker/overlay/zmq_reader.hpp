// ZmqReader: hangs a ZeroMQ socket on the reactor and hands every multipart
// message it receives to a callback. ZeroMQ's notification fd is
// edge-triggered and can miss edges after a send, so the owner calls poke()
// after sending; the reader then drains whatever is ready.
#pragma once

#include <functional>
#include <memory>

#include <zmq.hpp>

#include "core/message.hpp"
#include "core/reactor.hpp"

namespace banyan {

class ZmqReader {
  public:
    ZmqReader(Reactor& reactor, zmq::socket_t& socket, std::function<void(Frames&&)> on_message);
    ~ZmqReader();
    ZmqReader(const ZmqReader&) = delete;
    ZmqReader& operator=(const ZmqReader&) = delete;

    // Schedules a drain on the loop (coalesced: many pokes, one drain).
    void poke();
    // Handles whatever is ready now, before the caller goes on.
    void drain();

  private:
    Reactor& reactor_;
    zmq::socket_t& socket_;
    std::function<void(Frames&&)> on_message_;
    std::unique_ptr<FdWatcher> watcher_;
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
    bool drain_pending_ = false;
};

// Sends `frames` (after `address`, when given, for a ROUTER) without
// blocking. Error: EHOSTUNREACH when a ROUTER has no such peer, EAGAIN when
// the peer's queue is full.
Result<void> send_frames(zmq::socket_t& socket, const Frames& frames, const std::string* address = nullptr);

}  // namespace banyan
