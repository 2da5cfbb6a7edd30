#include "broker/overlay/zmq_reader.hpp"

#include <fmt/format.h>

#include "core/log.hpp"

namespace banyan {
namespace {
// Messages handled per wake-up before yielding to other sources on the loop.
constexpr int kDrainBatch = 256;
}  // namespace

ZmqReader::ZmqReader(Reactor& reactor, zmq::socket_t& socket, std::function<void(Frames&&)> on_message)
    : reactor_(reactor), socket_(socket), on_message_(std::move(on_message)) {
    int fd = socket_.get(zmq::sockopt::fd);
    watcher_ = std::make_unique<FdWatcher>(reactor_, fd, FdWatcher::Event::readable, [this] { drain(); });
    poke();
}

ZmqReader::~ZmqReader() {
    *alive_ = false;
}

void ZmqReader::poke() {
    if (drain_pending_)
        return;
    drain_pending_ = true;
    std::weak_ptr<bool> alive = alive_;
    reactor_.post([this, alive] {
        auto a = alive.lock();
        if (!a || !*a)
            return;
        drain_pending_ = false;
        drain();
    });
}

void ZmqReader::drain() {
    std::weak_ptr<bool> alive = alive_;
    for (int i = 0; i < kDrainBatch; i++) {
        Frames frames;
        try {
            if (!(socket_.get(zmq::sockopt::events) & ZMQ_POLLIN))
                return;
            bool more = true;
            while (more) {
                zmq::message_t part;
                auto got = socket_.recv(part, zmq::recv_flags::dontwait);
                if (!got)
                    return;
                frames.emplace_back(static_cast<const char*>(part.data()), part.size());
                more = part.more();
            }
        } catch (const zmq::error_t& e) {
            // The socket is closing (ETERM) or refused a call: nothing to read.
            log::error("overlay", "reading a message failed: {}", e.what());
            return;
        }
        try {
            on_message_(std::move(frames));
        } catch (const std::exception& e) {
            log::error("overlay", "dropped a message that could not be handled: {}", e.what());
        }
        auto a = alive.lock();
        if (!a || !*a)
            return;  // the callback destroyed this reader
    }
    poke();  // more may be waiting: continue after other work on the loop
}

Result<void> send_frames(zmq::socket_t& socket, const Frames& frames, const std::string* address) {
    try {
        size_t total = frames.size() + (address ? 1 : 0);
        size_t sent = 0;
        auto send_one = [&](const std::string& bytes) -> bool {
            sent++;
            auto flags = zmq::send_flags::dontwait;
            if (sent < total)
                flags = flags | zmq::send_flags::sndmore;
            return socket.send(zmq::buffer(bytes), flags).has_value();
        };
        if (address && !send_one(*address))
            return make_error(EAGAIN, "peer queue is full");
        for (const auto& f : frames)
            if (!send_one(f))
                return make_error(EAGAIN, "peer queue is full");
    } catch (const zmq::error_t& e) {
        return make_error(e.num(), e.what());
    }
    return {};
}

}  // namespace banyan
