// bench-overlay: overlay figures inside a running instance ($BANYAN_URI).
//   bench-overlay rtt RANK COUNT        ping rank 0 from a client of RANK's broker
//   bench-overlay fanout COUNT          publish at rank 0; time until every rank's client has it
//   bench-overlay throughput RANK COUNT WINDOW   pipelined pings from RANK's client to rank 0
//   bench-overlay rtt-while PID         ping rank 0 once a millisecond while process PID lives
// Prints one line of figures per run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <signal.h>

#include "core/client.hpp"

using namespace banyan;
using Clock = std::chrono::steady_clock;

namespace {

std::string dir_of_instance() {
    std::string uri = std::getenv("BANYAN_URI") ? std::getenv("BANYAN_URI") : "";
    if (uri.rfind("local://", 0) == 0)
        uri = uri.substr(8);
    return uri.substr(0, uri.rfind("/rank-"));
}

Client connect_rank(uint32_t rank) {
    auto c = Client::connect(dir_of_instance() + "/rank-" + std::to_string(rank) + "/local.sock");
    if (!c) {
        std::fprintf(stderr, "bench-overlay: %s\n", c.error().message.c_str());
        std::exit(1);
    }
    return std::move(*c);
}

double us_since(Clock::time_point t) {
    return std::chrono::duration<double, std::micro>(Clock::now() - t).count();
}

void print_stats(const char* what, std::vector<double> v) {
    std::sort(v.begin(), v.end());
    auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))]; };
    std::printf("%s: n=%zu median=%.1f us p99=%.1f us min=%.1f us\n", what, v.size(), at(0.5), at(0.99), v.front());
}

int rtt(uint32_t rank, int count) {
    Client client = connect_rank(rank);
    std::vector<double> samples;
    for (int i = 0; i < count + 10; i++) {
        auto t = Clock::now();
        if (auto r = client.rpc("broker.ping", {{"seq", i}}, 0); !r) {
            std::fprintf(stderr, "bench-overlay: %s\n", r.error().message.c_str());
            return 1;
        }
        if (i >= 10)  // warm-up excluded
            samples.push_back(us_since(t));
    }
    print_stats(("rtt rank " + std::to_string(rank) + " -> 0").c_str(), samples);
    return 0;
}

int fanout(int count) {
    Client root = connect_rank(0);
    auto info = root.rpc("broker.info", nlohmann::json::object(), 0);
    uint32_t size = info ? info->value("size", 1u) : 1u;
    std::vector<Client> subscribers;
    for (uint32_t r = 0; r < size; r++) {
        subscribers.push_back(connect_rank(r));
        (void)subscribers.back().rpc("event.subscribe", {{"topic", "bench."}});
    }
    std::vector<double> samples;
    for (int i = 0; i < count; i++) {
        auto t = Clock::now();
        (void)root.send(Message::request("event.publish", {{"topic", "bench.x"}}, 0));
        for (auto& s : subscribers) {
            for (;;) {
                auto m = s.recv(std::chrono::seconds(10));
                if (!m) {
                    std::fprintf(stderr, "bench-overlay: %s\n", m.error().message.c_str());
                    return 1;
                }
                if (m->type == MessageType::event)
                    break;
            }
        }
        samples.push_back(us_since(t));
        (void)root.recv(std::chrono::seconds(10));  // publish's response
    }
    print_stats(("event fan-out to " + std::to_string(size) + " ranks").c_str(), samples);
    return 0;
}

int throughput(uint32_t rank, int count, int window) {
    Client client = connect_rank(rank);
    auto t = Clock::now();
    int sent = 0;
    int received = 0;
    while (received < count) {
        while (sent < count && sent - received < window) {
            (void)client.send(Message::request("broker.ping", nlohmann::json::object(), 0));
            sent++;
        }
        auto m = client.recv(std::chrono::seconds(10));
        if (!m) {
            std::fprintf(stderr, "bench-overlay: %s\n", m.error().message.c_str());
            return 1;
        }
        received++;
    }
    double s = us_since(t) / 1e6;
    std::printf("throughput rank %u -> 0: %d RPCs in %.3f s = %.0f RPCs/s (%.0f messages/s), window %d\n", rank, count,
                s, count / s, 2 * count / s, window);
    return 0;
}

// Rank 0's answer time while something else (a submission burst) loads
// it: one ping a millisecond, so the pinger itself adds no load to speak of.
int rtt_while(pid_t pid) {
    Client client = connect_rank(0);
    std::vector<double> samples;
    auto start = Clock::now();
    while (kill(pid, 0) == 0) {
        auto t = Clock::now();
        if (auto r = client.rpc("broker.ping", nlohmann::json::object(), 0, std::chrono::seconds(60)); !r) {
            std::fprintf(stderr, "bench-overlay: %s\n", r.error().message.c_str());
            return 1;
        }
        samples.push_back(us_since(t));
        std::this_thread::sleep_until(t + std::chrono::milliseconds(1));
    }
    if (samples.empty()) {
        std::fprintf(stderr, "bench-overlay: process %d was gone before the first ping\n", static_cast<int>(pid));
        return 1;
    }
    char what[64];
    std::snprintf(what, sizeof what, "rtt rank 0 during %.1f s of load (max %.0f us)", us_since(start) / 1e6,
                  *std::max_element(samples.begin(), samples.end()));
    print_stats(what, samples);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    std::string verb = argc > 1 ? argv[1] : "";
    if (verb == "rtt" && argc == 4)
        return rtt(std::stoul(argv[2]), std::stoi(argv[3]));
    if (verb == "fanout" && argc == 3)
        return fanout(std::stoi(argv[2]));
    if (verb == "throughput" && argc == 5)
        return throughput(std::stoul(argv[2]), std::stoi(argv[3]), std::stoi(argv[4]));
    if (verb == "rtt-while" && argc == 3)
        return rtt_while(static_cast<pid_t>(std::stol(argv[2])));
    std::fprintf(stderr,
                 "usage: bench-overlay rtt RANK COUNT | fanout COUNT | throughput RANK COUNT WINDOW | rtt-while PID\n");
    return 2;
}
