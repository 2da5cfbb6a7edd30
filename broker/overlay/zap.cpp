#include "broker/overlay/zap.hpp"

#include <fmt/format.h>

#include "core/log.hpp"

namespace banyan {

Result<std::unique_ptr<ZapAuthenticator>> ZapAuthenticator::start(Reactor& reactor, zmq::context_t& context,
                                                                  const std::string& allowed_public_key) {
    std::unique_ptr<ZapAuthenticator> zap(new ZapAuthenticator(context, allowed_public_key));
    try {
        zap->socket_.bind("inproc://zeromq.zap.01");
    } catch (const zmq::error_t& e) {
        return make_error(e.num(), fmt::format("ZAP handler: {}", e.what()));
    }
    ZapAuthenticator* self = zap.get();
    zap->reader_ =
        std::make_unique<ZmqReader>(reactor, zap->socket_, [self](Frames&& f) { self->on_request(std::move(f)); });
    return zap;
}

void ZapAuthenticator::on_request(Frames&& frames) {
    // Request: version, request_id, domain, address, identity, mechanism, credentials...
    if (frames.size() < 6) {
        log::warning("overlay", "ZAP: malformed request of {} frames", frames.size());
        return;  // a REP socket must answer; ZeroMQ itself never sends this
    }
    const std::string& request_id = frames[1];
    const std::string& address = frames[3];
    const std::string& mechanism = frames[5];
    bool ok = false;
    std::string why = "not CURVE";
    if (mechanism == "CURVE" && frames.size() >= 7 && frames[6].size() == 32) {
        char z85[41];
        zmq_z85_encode(z85, reinterpret_cast<const uint8_t*>(frames[6].data()), 32);
        ok = allowed_ == z85;
        why = fmt::format("public key {} is not the cluster certificate's", z85);
    }
    if (!ok)
        log::error("overlay", "refused connection from {}: {}", address.empty() ? "(unknown)" : address, why);
    Frames reply = {
        "1.0", request_id, ok ? "200" : "400", ok ? "OK" : "not the cluster certificate", ok ? "banyan" : "", ""};
    if (auto r = send_frames(socket_, reply); !r)
        log::warning("overlay", "ZAP reply: {}", r.error().message);
    reader_->poke();
}

}  // namespace banyan
