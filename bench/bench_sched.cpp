// bench-sched: matcher figures (bench/RESULTS.md, issue 5). Each call runs
// one scenario in a fresh process, so peak RSS is that scenario's.
//   bench-sched load NODES SHAPE                 graph + pool build time, RSS
//   bench-sched fill NODES SHAPE POLICY KIND     match KIND jobs until full
//                                                (KIND: core = 1-core slot,
//                                                node = one whole node)
//   bench-sched nodes16 NODES SHAPE COUNT        COUNT 16-node jobs after
//                                                1,000 1-node jobs
//   bench-sched reserve NODES SHAPE COUNT        COUNT allocate_orelse_reserve
//                                                of 4-node jobs on a full graph
//   bench-sched constrained NODES SHAPE POLICY   1-node jobs that require the
//                                                property half the nodes have
//                                                (even ranks), until none fits,
//                                                beside as many unconstrained
//   bench-sched queues NODES SHAPE PENDING       one scheduling pass of 4 queues
//                                                (each a quarter of the nodes,
//                                                by property) holding PENDING
//                                                jobs in all, the nodes full
//   bench-sched preempt NODES SHAPE PENDING      one pass with preemption: a
//                                                low queue (conservative, 50
//                                                reservations) full of 1-node
//                                                jobs with PENDING waiting; a
//                                                high-tier 16-node job chooses
//                                                its victims (sched.md §9)
//   bench-sched preempt NODES SHAPE PENDING ADVANCE   the same with ADVANCE
//                                                advance reservations of 4
//                                                nodes each, from 2000 s on
//                                                for an hour (sched.md §10)
// SHAPE is a synthetic node shape, e.g. "socket:2,core:18,gpu:1".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_util.hpp"
#include "resource/synthetic.hpp"
#include "sched/matcher.hpp"
#include "sched/preemption.hpp"
#include "sched/sched_queue.hpp"

using namespace banyan;
using Clock = std::chrono::steady_clock;

namespace {

// A known policy's (the name is this file's, and right).
std::unique_ptr<MatchPolicy> policy_named(const std::string& name) {
    auto policy = MatchPolicy::create(name);
    return std::move(*policy);
}

double since_us(Clock::time_point t) {
    return std::chrono::duration<double, std::micro>(Clock::now() - t).count();
}

struct Loaded {
    std::unique_ptr<Matcher> matcher;
    double ms = 0;
};

Loaded load(int nodes, const std::string& shape, const std::string& policy, bool even_property = false) {
    auto t0 = Clock::now();
    auto descriptions = parse_synthetic_cluster(fmt::format("node[0-{}]: {}", nodes - 1, shape));
    if (!descriptions) {
        std::fprintf(stderr, "bench-sched: %s\n", descriptions.error().message.c_str());
        std::exit(2);
    }
    Loaded out;
    {
        if (even_property)
            for (auto& d : *descriptions)
                if (d.rank % 2 == 0)
                    d.properties.push_back("even");
        auto graph = ResourceGraph::from_nodes(*descriptions);
        descriptions->clear();
        out.matcher = std::make_unique<Matcher>(*graph, policy_named(policy));
    }
    out.ms = since_us(t0) / 1000;
    return out;
}

Jobspec jobspec(const std::string& resources, int duration = 3600) {
    auto js =
        Jobspec::parse(fmt::format("{{version: 9999, resources: [{}], attributes: {{system: {{duration: {}}}}}, "
                                   "tasks: [{{command: [app], slot: s, count: {{per_slot: 1}}}}]}}",
                                   resources, duration));
    if (!js) {
        std::fprintf(stderr, "bench-sched: %s\n", js.error().message.c_str());
        std::exit(2);
    }
    return *js;
}

void report(const std::string& name, std::vector<double>& us, double load_ms) {
    std::sort(us.begin(), us.end());
    double total = 0;
    for (double u : us)
        total += u;
    auto at = [&](double q) {
        return us.empty() ? 0 : us[std::min(us.size() - 1, static_cast<size_t>(q * us.size()))];
    };
    std::printf(
        "%s: %zu matches, median %.1f us, p99 %.1f us, max %.1f us, total %.2f s; load %.0f ms; "
        "peak RSS %ld MB\n",
        name.c_str(), us.size(), at(0.5), at(0.99), us.empty() ? 0 : us.back(), total / 1e6, load_ms, peak_rss_mb());
}

// Matches until one fails; returns the time of each successful match.
std::vector<double> fill(Matcher& m, const Jobspec& js, uint64_t& jobid, size_t limit = SIZE_MAX) {
    std::vector<double> us;
    while (us.size() < limit) {
        auto t = Clock::now();
        auto r = m.match(js, MatchOp::allocate, 0, jobid++);
        double took = since_us(t);
        if (!r || !r->matched)
            break;
        us.push_back(took);
    }
    return us;
}

const char* kCoreJob = "{type: slot, count: 1, label: s, with: [{type: core, count: 1}]}";

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> a(argv + 1, argv + argc);
    uint64_t jobid = 1;
    if (a.size() == 3 && a[0] == "load") {
        Loaded l = load(std::stoi(a[1]), a[2], "pack");
        std::printf("load %s nodes of %s: %u vertices, %.0f ms, peak RSS %ld MB\n", a[1].c_str(), a[2].c_str(),
                    l.matcher->pool().size(), l.ms, peak_rss_mb());
        return 0;
    }
    if (a.size() == 5 && a[0] == "fill") {
        Loaded l = load(std::stoi(a[1]), a[2], a[3]);
        // A whole node is a slot holding a node: Fluxion's form, which
        // every policy places (a slot of a node's cores would stay within
        // one socket under Fluxion's policies).
        std::string js = a[4] == "core" ? kCoreJob : "{type: slot, count: 1, label: s, with: [{type: node, count: 1}]}";
        auto us = fill(*l.matcher, jobspec(js), jobid);
        report(fmt::format("fill {} x {} with {}-jobs, {}", a[1], a[2], a[4], a[3]), us, l.ms);
        return 0;
    }
    if (a.size() == 4 && a[0] == "constrained") {
        const char* node_job = "{type: slot, count: 1, label: s, with: [{type: node, count: 1}]}";
        Jobspec constrained = jobspec(node_job);
        constrained.constraint = *Constraint::from_json({{"properties", {"even"}}});
        Loaded l = load(std::stoi(a[1]), a[2], a[3], true);
        auto us = fill(*l.matcher, constrained, jobid);
        size_t matched = us.size();
        report(fmt::format("{} x {}, {}: 1-node jobs requiring a property half the nodes have", a[1], a[2], a[3]), us,
               l.ms);
        Loaded plain = load(std::stoi(a[1]), a[2], a[3], true);
        auto base = fill(*plain.matcher, jobspec(node_job), jobid, matched);
        report(fmt::format("{} x {}, {}: as many 1-node jobs, no constraint", a[1], a[2], a[3]), base, plain.ms);
        return 0;
    }
    if (a.size() == 4 && a[0] == "queues") {
        int nodes = std::stoi(a[1]);
        auto descriptions = parse_synthetic_cluster(fmt::format("node[0-{}]: {}", nodes - 1, a[2]));
        if (!descriptions)
            return 2;
        for (auto& d : *descriptions)
            d.properties.push_back(fmt::format("q{}", d.rank % 4));
        auto graph = ResourceGraph::from_nodes(*descriptions);
        Matcher matcher(*graph, policy_named("pack"));
        std::vector<std::unique_ptr<SchedQueue>> queues;
        for (int q = 0; q < 4; ++q)
            queues.push_back(std::make_unique<SchedQueue>(matcher, QueueConfig{QueuePolicy::fcfs, 1000, 64, 60}));
        auto queue_job = [&](int q) {
            Jobspec js = jobspec("{type: slot, count: 1, label: s, with: [{type: core, count: 1}]}");
            js.constraint = *Constraint::from_json({{"properties", {fmt::format("q{}", q)}}});
            return js;
        };
        // Fill every node with running 1-core jobs, then queue the rest.
        for (int q = 0; q < 4; ++q) {
            for (;;) {
                if (!queues[q]->submit(jobid, queue_job(q), 16, static_cast<double>(jobid)).ok())
                    return 2;
                ++jobid;
                if (queues[q]->schedule(0).empty())
                    break;
            }
        }
        size_t pending = std::stoul(a[3]);
        for (size_t i = 0; i < pending; ++i, ++jobid)
            (void)queues[i % 4]->submit(jobid, queue_job(static_cast<int>(i % 4)), 16, static_cast<double>(jobid));
        std::vector<double> us;
        for (int pass = 0; pass < 20; ++pass) {
            auto t = Clock::now();
            for (auto& q : queues)
                q->schedule(1 + pass);
            us.push_back(since_us(t));
        }
        report(fmt::format("one pass of 4 queues, {} jobs pending, {} x {} full", pending, a[1], a[2]), us, 0);
        return 0;
    }
    if ((a.size() == 4 || a.size() == 5) && a[0] == "preempt") {
        Loaded l = load(std::stoi(a[1]), a[2], "pack");
        Matcher& matcher = *l.matcher;
        size_t advance = a.size() == 5 ? std::stoul(a[4]) : 0;
        for (size_t i = 0; i < advance; ++i) {
            int64_t start = 2000 + 10 * static_cast<int64_t>(i);
            auto ranks = matcher.reservations().choose({.count = 4}, start, start + 3600);
            if (!ranks || !matcher.reservations().add({fmt::format("r{}", i), start, start + 3600, *ranks}))
                return 2;
        }
        SchedQueue low(matcher, QueueConfig{QueuePolicy::conservative, 1000, 50, 60});
        SchedQueue high(matcher, QueueConfig{QueuePolicy::easy, 1000, 64, 60});
        // Whole-node jobs of varied lengths fill the cluster; the rest wait.
        auto node_job = [](int i) {
            return jobspec("{type: node, count: 1, exclusive: true, with: [{type: core, count: 1}]}",
                           600 + 60 * (i % 50));
        };
        for (int i = 0;; ++i) {
            if (!low.submit(jobid, node_job(i), 16, static_cast<double>(jobid)).ok())
                return 2;
            ++jobid;
            if (low.schedule(0).empty())
                break;
        }
        size_t pending = std::stoul(a[3]);
        for (size_t i = 0; i < pending; ++i, ++jobid)
            (void)low.submit(jobid, node_job(static_cast<int>(i)), 16, static_cast<double>(jobid));
        Jobspec wide = jobspec("{type: node, count: 16, exclusive: true, with: [{type: core, count: 1}]}", 3600);
        uint64_t wide_id = jobid++;
        (void)high.submit(wide_id, wide, 16, 0);
        std::vector<double> us;
        size_t victims = 0;
        for (int pass = 0; pass < 10; ++pass) {
            auto t = Clock::now();
            high.prepare(1 + pass);
            low.prepare(1 + pass);
            high.schedule(1 + pass);
            low.schedule(1 + pass);
            high.drop_reservations();
            low.drop_reservations();
            std::vector<PreemptionCandidate> candidates;
            for (uint64_t id : low.running_ids())
                candidates.push_back({id, 0});
            victims = choose_victims(matcher, wide, std::move(candidates), 1 + pass).size();
            us.push_back(since_us(t));
        }
        report(fmt::format("one pass with preemption: {} pending, 50 reservations of pending jobs, {} advance "
                           "reservations, a 16-node job takes {} victims, {} x {}",
                           pending, advance, victims, a[1], a[2]),
               us, l.ms);
        return 0;
    }
    if (a.size() == 4 && a[0] == "nodes16") {
        Loaded l = load(std::stoi(a[1]), a[2], "pack");
        fill(*l.matcher, jobspec(kCoreJob), jobid, 1000);
        Jobspec sixteen = jobspec(
            "{type: node, count: 16, with: [{type: slot, count: 1, label: s, with: "
            "[{type: core, count: 4}]}]}");
        auto us = fill(*l.matcher, sixteen, jobid, std::stoul(a[3]));
        report(fmt::format("16-node jobs on {} x {} after 1,000 jobs", a[1], a[2]), us, l.ms);
        return 0;
    }
    if (a.size() == 4 && a[0] == "reserve") {
        Loaded l = load(std::stoi(a[1]), a[2], "pack");
        // Fill with whole-node jobs of varied lengths, then reserve.
        for (int i = 0;; ++i) {
            Jobspec js =
                jobspec("{type: node, count: 1, exclusive: true, with: [{type: core, count: 1}]}", 600 + 60 * (i % 50));
            auto r = l.matcher->match(js, MatchOp::allocate, 0, jobid++);
            if (!r || !r->matched)
                break;
        }
        std::vector<double> us;
        size_t reserved = 0;
        for (size_t i = 0; i < std::stoul(a[3]); ++i) {
            Jobspec js = jobspec("{type: node, count: 4, exclusive: true, with: [{type: core, count: 1}]}",
                                 300 + 30 * static_cast<int>(i % 20));
            auto t = Clock::now();
            auto r = l.matcher->match(js, MatchOp::allocate_orelse_reserve, 0, jobid++);
            us.push_back(since_us(t));
            reserved += r && r->reserved;
        }
        report(fmt::format("allocate_orelse_reserve on {} x {} ({} reserved)", a[1], a[2], reserved), us, l.ms);
        return 0;
    }
    std::fprintf(stderr, "usage: bench-sched load|fill|nodes16|reserve ... (see the source's head)\n");
    return 2;
}
