// bench-resource: resource graph figures.
//   bench-resource graph NODES     build the graph of NODES nodes of
//                                  socket:2,core:32,gpu:4; print time and peak RSS
//   bench-resource list COUNT      time COUNT resource.list RPCs ($BANYAN_URI)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "core/client.hpp"
#include "bench/bench_util.hpp"
#include "resource/graph.hpp"
#include "resource/synthetic.hpp"

using namespace banyan;
using Clock = std::chrono::steady_clock;

namespace {

int graph(int n) {
    std::string spec = "node[0-" + std::to_string(n - 1) + "]: socket:2,core:32,gpu:4,memory:256G";
    auto t0 = Clock::now();
    auto nodes = parse_synthetic_cluster(spec);
    auto t1 = Clock::now();
    auto g = ResourceGraph::from_nodes(*nodes);
    auto t2 = Clock::now();
    if (!g) {
        std::fprintf(stderr, "bench-resource: %s\n", g.error().message.c_str());
        return 1;
    }
    auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
    std::printf("graph %d nodes: %zu vertices, describe %.0f ms + build %.0f ms = %.0f ms, peak RSS %ld MB\n", n,
                g->size(), ms(t0, t1), ms(t1, t2), ms(t0, t2), peak_rss_mb());
    return 0;
}

int list(int count) {
    auto client = Client::connect();
    if (!client) {
        std::fprintf(stderr, "bench-resource: %s\n", client.error().message.c_str());
        return 1;
    }
    std::vector<double> samples;
    nlohmann::json last;
    for (int i = 0; i < count; i++) {
        auto t = Clock::now();
        auto r = client->rpc("resource.list", nlohmann::json::object(), 0);
        samples.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t).count());
        if (!r) {
            std::fprintf(stderr, "bench-resource: %s\n", r.error().message.c_str());
            return 1;
        }
        last = *r;
    }
    std::sort(samples.begin(), samples.end());
    std::printf("resource.list over %s nodes: n=%d median %.2f ms p99 %.2f ms\n", last["free"]["nnodes"].dump().c_str(),
                count, samples[samples.size() / 2], samples[std::min(samples.size() - 1, samples.size() * 99 / 100)]);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    std::string verb = argc > 1 ? argv[1] : "";
    if (verb == "graph" && argc == 3)
        return graph(std::stoi(argv[2]));
    if (verb == "list" && argc == 3)
        return list(std::stoi(argv[2]));
    std::fprintf(stderr, "usage: bench-resource graph NODES | list COUNT\n");
    return 2;
}
