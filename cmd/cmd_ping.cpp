// banyan ping: round trip to a broker, with the route the request took.
#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "cmd/cli_util.hpp"
#include "core/idset.hpp"

namespace banyan::cli {

void add_ping(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand("ping", "Measure the round trip to a broker and show the route taken");
    static std::string target;
    static int count = 1;
    static double interval = 1.0;
    static size_t pad = 0;
    cmd->add_option("RANK", target, "the broker's rank")->required();
    cmd->add_option("-c,--count", count, "number of pings (default 1)")->check(CLI::Range(1, 1000000));
    cmd->add_option("-i,--interval", interval, "seconds between pings (default 1)")->check(CLI::Range(0.0, 3600.0));
    cmd->add_option("-p,--pad", pad, "bytes of padding in each request");
    cmd->callback([&exit_code] {
        auto rank = parse_decimal(target, IdSet::kMaxId, fmt::format("rank '{}'", target));
        if (!rank)
            fail(fmt::format("{}: expected a rank number", target));
        Client client = connect_to_instance();
        for (int i = 0; i < count; i++) {
            if (i > 0)
                std::this_thread::sleep_for(std::chrono::duration<double>(interval));
            auto start = std::chrono::steady_clock::now();
            auto body =
                client.rpc("broker.ping", {{"seq", i}, {"pad", std::string(pad, 'p')}}, static_cast<uint32_t>(*rank));
            double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
            if (!body)
                fail(fmt::format("rank {}: {}", *rank, body.error().message));
            std::string route = "client";
            auto hops = body->value("route", nlohmann::json::array());
            for (auto it = hops.rbegin(); it != hops.rend(); ++it) {
                std::string hop = it->get<std::string>();
                if (!hop.empty() && hop[0] != 'c')
                    route += "!" + hop;
            }
            route += "!" + std::to_string(body->value("rank", 0));
            fmt::print("broker.ping rank={} seq={} route={} time={:.3f} ms\n", *rank, i, route, ms);
        }
        exit_code = 0;
    });
}

}  // namespace banyan::cli
