// Fuzzes the message decoders. The first input byte picks the path:
// even: the bytes are a stream (spec section 5) for StreamDecoder;
// odd: the bytes are split on 0xff into frames for decode().
// Whatever decodes must encode and decode again to the same message.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/message.hpp"

using namespace banyan;

namespace {

void check_round_trip(const Message& msg) {
    auto again = decode(encode(msg));
    if (!again.ok() || encode(*again) != encode(msg))
        std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0)
        return 0;
    std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
    if (data[0] % 2 == 0) {
        StreamDecoder dec(DecodeLimits{.max_payload = 4096});
        dec.feed(bytes);
        for (;;) {
            auto r = dec.next();
            if (!r.ok() || !r->has_value())
                break;
            check_round_trip(**r);
        }
        return 0;
    }
    Frames frames;
    size_t start = 0;
    for (size_t i = 0; i <= bytes.size(); i++) {
        if (i == bytes.size() || static_cast<uint8_t>(bytes[i]) == 0xff) {
            frames.emplace_back(bytes.substr(start, i - start));
            start = i + 1;
        }
    }
    auto msg = decode(frames, DecodeLimits{.max_payload = 4096});
    if (msg.ok()) {
        check_round_trip(*msg);
        (void)msg->json();
        (void)msg->error_text();
    }
    return 0;
}
