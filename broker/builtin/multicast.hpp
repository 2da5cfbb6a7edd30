// broker.multicast (doc/spec/overlay.md §10.1): one request for many
// ranks, passed along the tree once per link (down to the ranks below,
// up for those outside the subtree), each rank's answer passed back.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "core/idset.hpp"
#include "core/message.hpp"

namespace banyan {

class Broker;

class Multicast {
  public:
    // Registers broker.multicast; the service lives as long as the broker.
    static void register_with(Broker& broker);
    // A broker.multicast to rank `to` of `topic` with `payload` (JSON
    // object text, passed on as it is) for `ranks` (overlay.md §10.1).
    static Message request(uint32_t to, const IdSet& ranks, std::string_view topic, std::string_view payload,
                           bool streaming);

  private:
    explicit Multicast(Broker& broker) : broker_(broker) {}

    // A request whose answers are wanted: the ranks still to answer, and
    // the answers that came in this pass of the loop (sent up as one).
    struct Relay {
        Message request;  // its payload dropped
        std::unordered_set<uint32_t> waiting;
        std::vector<std::string> batch;
    };

    void on_request(const Message& req);
    // `topic` to `rank` as a request of its own (STREAMING if `streaming`);
    // its answers go into relay `relay` (0: none wanted).
    void ask_one(uint64_t relay, uint32_t rank, const std::string& topic, const std::string& payload, bool streaming);
    // A child's part (the ranks below it), or the parent's (the ranks
    // outside this subtree), as one multicast to that broker.
    void ask_neighbour(uint64_t relay, Message request, const IdSet& part);
    void on_neighbour_answer(uint64_t relay, const IdSet& part, const Message& resp);
    // Passes `entry` ({"rank", ...}, as text) up, in the batch sent at the
    // end of this pass of the loop (flush()): a rank's answers until its
    // last (`more` false), none after.
    void pass_up(uint64_t relay, uint32_t rank, std::string entry, bool more = false);
    // Sends the batch; ends the stream once every rank has answered.
    void flush(uint64_t relay);
    void pass_up_error(uint64_t relay, uint32_t rank, int errnum, const std::string& errstr);

    Broker& broker_;
    std::map<uint64_t, Relay> relays_;
    uint64_t next_relay_ = 1;
};

}  // namespace banyan
