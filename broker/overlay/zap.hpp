// ZapAuthenticator: the ZeroMQ authentication handler (ZAP, RFC 27) of a
// broker. It accepts CURVE clients whose public key is the cluster's and
// refuses (and logs) every other, so a broker holding a different
// certificate cannot join.
#pragma once

#include <memory>
#include <string>

#include <zmq.hpp>

#include "broker/overlay/zmq_reader.hpp"
#include "core/reactor.hpp"
#include "core/result.hpp"

namespace banyan {

class ZapAuthenticator {
  public:
    // Binds the ZAP endpoint in `context`; must exist before any CURVE
    // server socket of that context is bound.
    static Result<std::unique_ptr<ZapAuthenticator>> start(Reactor& reactor, zmq::context_t& context,
                                                           const std::string& allowed_public_key);

  private:
    ZapAuthenticator(zmq::context_t& context, std::string allowed)
        : socket_(context, zmq::socket_type::rep), allowed_(std::move(allowed)) {}
    void on_request(Frames&& frames);

    zmq::socket_t socket_;
    std::string allowed_;  // Z85
    std::unique_ptr<ZmqReader> reader_;
};

}  // namespace banyan
