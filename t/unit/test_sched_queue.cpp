// The queue policies driven as the job manager drives them (submit, pass,
// free, cancel), on tiny.graphml: two nodes of 36 cores.
#include <catch2/catch.hpp>

#include <filesystem>

#include <fmt/format.h>

#include "core/text_file.hpp"
#include "resource/grug.hpp"
#include "sched/sched_queue.hpp"

using namespace banyan;

namespace {

// A known policy's (the name is this file's, and right).
std::unique_ptr<MatchPolicy> policy_named(const std::string& name) {
    auto policy = MatchPolicy::create(name);
    return std::move(*policy);
}

struct Fixture {
    std::unique_ptr<Matcher> matcher;
    std::unique_ptr<SchedQueue> queue;
    explicit Fixture(QueuePolicy policy) {
        auto text = read_text_file(
            (std::filesystem::path(BANYAN_CONFORMANCE_DIR) / "fluxion" / "grugs" / "tiny.graphml").string());
        REQUIRE(text.ok());
        auto graph = read_grug(*text);
        REQUIRE(graph.ok());
        matcher = std::make_unique<Matcher>(*graph, policy_named("pack"));
        queue = std::make_unique<SchedQueue>(*matcher, QueueConfig{policy, 1000, 64, 60});
    }
    // N whole nodes for `duration` seconds.
    static Jobspec nodes(int n, int duration) {
        auto js =
            Jobspec::parse(fmt::format("{{version: 1, resources: [{{type: node, count: {}, exclusive: true, "
                                       "with: [{{type: slot, count: 1, label: t, with: [{{type: core, count: "
                                       "1}}]}}]}}], tasks: [{{command: [app], slot: t, count: {{per_slot: 1}}}}],"
                                       " attributes: {{system: {{duration: {}}}}}}}",
                                       n, duration));
        REQUIRE(js.ok());
        return *js;
    }
    void submit(uint64_t id, int n, int duration, int64_t priority = 16) {
        REQUIRE(queue->submit(id, nodes(n, duration), priority, static_cast<double>(id)).ok());
    }
    std::vector<uint64_t> pass(int64_t now) {
        std::vector<uint64_t> ids;
        for (const auto& s : queue->schedule(now))
            ids.push_back(s.id);
        return ids;
    }
    const PendingJob* pending(uint64_t id) const {
        for (const PendingJob* p : queue->pending())
            if (p->id == id)
                return p;
        return nullptr;
    }
};

using Ids = std::vector<uint64_t>;

}  // namespace

TEST_CASE("queue: fcfs never lets a later job pass a blocked one", "[queue]") {
    Fixture f(QueuePolicy::fcfs);
    f.submit(1, 1, 100);
    f.submit(2, 2, 100);
    f.submit(3, 1, 50);
    CHECK(f.pass(0) == Ids{1});
    CHECK(f.pending(2)->reason == "insufficient resources");
    CHECK_FALSE(f.pending(2)->t_estimate);
    CHECK(f.pending(3)->reason == "priority");
    REQUIRE(f.queue->free(1).ok());
    CHECK(f.pass(10) == Ids{2});
    REQUIRE(f.queue->free(2).ok());
    CHECK(f.pass(20) == Ids{3});
}

TEST_CASE("queue: easy backfills a job that ends before the reservation", "[queue]") {
    Fixture f(QueuePolicy::easy);
    f.submit(1, 1, 100);
    f.submit(2, 2, 100);
    f.submit(3, 1, 50);   // fits before job 2's start
    f.submit(4, 1, 500);  // would delay job 2
    CHECK(f.pass(0) == Ids{1, 3});
    REQUIRE(f.pending(2)->t_estimate);
    CHECK(*f.pending(2)->t_estimate == 100);
    CHECK_FALSE(f.pending(4)->t_estimate);  // easy: one reservation
    CHECK(f.pending(4)->reason == "insufficient resources");
    // Both running jobs end; job 2 (first in the queue) starts, not job 4.
    REQUIRE(f.queue->free(1).ok());
    REQUIRE(f.queue->free(3).ok());
    CHECK(f.pass(60) == Ids{2});
}

TEST_CASE("queue: conservative reserves every blocked job", "[queue]") {
    Fixture f(QueuePolicy::conservative);
    f.submit(1, 2, 100);
    f.submit(2, 2, 100);
    f.submit(3, 1, 100);
    CHECK(f.pass(0) == Ids{1});
    CHECK(*f.pending(2)->t_estimate == 100);
    CHECK(*f.pending(3)->t_estimate == 200);
}

TEST_CASE("queue: priority first, then submit order; urgency changes reorder", "[queue]") {
    Fixture f(QueuePolicy::fcfs);
    f.submit(1, 2, 100);
    f.submit(2, 2, 100, 10);
    f.submit(3, 2, 100, 20);
    CHECK(f.pass(0) == Ids{3});
    REQUIRE(f.queue->prioritize(2, 30).ok());
    REQUIRE(f.queue->free(3).ok());
    CHECK(f.pass(1) == Ids{2});
    CHECK(f.queue->prioritize(99, 1).error().code == ENOENT);
}

TEST_CASE("queue: cancel, unsatisfiable, duplicates", "[queue]") {
    Fixture f(QueuePolicy::easy);
    auto three = f.queue->submit(1, Fixture::nodes(3, 10), 16, 1);
    REQUIRE_FALSE(three.ok());
    CHECK(three.error().code == ENOSPC);
    CHECK(three.error().message.find("unsatisfiable") != std::string::npos);
    f.submit(2, 2, 100);
    CHECK(f.queue->submit(2, Fixture::nodes(1, 10), 16, 1).error().code == EEXIST);
    f.submit(3, 2, 100);
    CHECK(f.pass(0) == Ids{2});
    REQUIRE(f.queue->cancel(3).ok());
    CHECK(f.queue->cancel(3).error().code == ENOENT);
    CHECK(f.queue->free(3).error().code == ENOENT);
    CHECK(f.queue->pending().empty());
}

TEST_CASE("queue: a restored job holds its node; an overrun keeps holding it", "[queue]") {
    Fixture f(QueuePolicy::easy);
    Rv1 r;
    r.ranks[1].cores = *IdSet::parse("0-35");
    REQUIRE(f.queue->restore(7, r, 0, 100).ok());
    CHECK(f.queue->restore(8, r, 0, 100).error().code == EBUSY);
    f.submit(1, 2, 100);
    CHECK(f.pass(0).empty());
    CHECK(*f.pending(1)->t_estimate == 100);
    // Job 7 runs past its end: at 150 its node is still held, and the
    // reservation moves past the grace period.
    CHECK(f.pass(150).empty());
    CHECK(*f.pending(1)->t_estimate == 210);
    REQUIRE(f.queue->free(7).ok());
    CHECK(f.pass(160) == Ids{1});
}

TEST_CASE("queue: a job that needs drained or down nodes waits for them without blocking others", "[queue]") {
    for (QueuePolicy policy : {QueuePolicy::fcfs, QueuePolicy::easy}) {
        Fixture f(policy);
        f.matcher->set_node_states(IdSet::range(1, 1), IdSet{});
        // Two nodes exist, one is drained: accepted, not ENOSPC.
        f.submit(1, 2, 100);
        f.submit(2, 1, 100);
        CHECK(f.pass(0) == Ids{2});
        REQUIRE(f.pending(1) != nullptr);
        CHECK(f.pending(1)->reason == "waiting for drained, down or unjoined nodes");
        // Job 3 needs one node, and the only one up is busy: it waits behind job 2.
        f.submit(3, 1, 100);
        CHECK(f.pass(1).empty());
        CHECK(f.pending(3)->reason != "waiting for drained, down or unjoined nodes");
        REQUIRE(f.queue->free(2).ok());
        CHECK(f.pass(2) == Ids{3});
        // Rank 0 goes down while job 3 runs on it; undrain rank 1: job 1
        // still cannot start (it needs both), and nothing lands on rank 0.
        f.matcher->set_node_states(IdSet{}, IdSet::range(0, 0));
        f.submit(4, 1, 100);
        CHECK(f.pass(3) == Ids{4});
        CHECK(f.matcher->allocated().ranks.count(1) == 1);
        REQUIRE(f.queue->free(3).ok());
        REQUIRE(f.queue->free(4).ok());
        CHECK(f.pass(4).empty());
        CHECK(f.pending(1)->reason == "waiting for drained, down or unjoined nodes");
        f.matcher->set_node_states(IdSet{}, IdSet{});
        CHECK(f.pass(5) == Ids{1});
    }
}

TEST_CASE("queue: a reloaded graph keeps running jobs where they run", "[queue]") {
    auto nodes = [](std::vector<uint32_t> cores) {
        std::vector<NodeDescription> out;
        for (uint32_t r = 0; r < cores.size(); r++)
            out.push_back(NodeDescription{r, fmt::format("n{}", r), {{IdSet::range(0, cores[r] - 1), {}, 0}}});
        auto graph = ResourceGraph::from_nodes(out);
        REQUIRE(graph.ok());
        return std::move(*graph);
    };
    Matcher matcher(nodes({4, 4}), policy_named("pack"));
    SchedQueue queue(matcher, QueueConfig{QueuePolicy::fcfs, 1000, 64, 60});
    auto pass = [&](int64_t now) {
        Ids ids;
        for (const auto& started : queue.schedule(now))
            ids.push_back(started.id);
        return ids;
    };
    REQUIRE(queue.submit(1, Fixture::nodes(1, 100), 16, 1).ok());
    CHECK(pass(0) == Ids{1});
    Rv1 held = matcher.allocated();
    REQUIRE(held.ranks.size() == 1);
    uint32_t rank = held.ranks.begin()->first;
    CHECK(held.ranks.at(rank).cores == IdSet::range(0, 3));
    // The same two nodes again, and a third (a broker joined).
    CHECK(queue.reload(nodes({4, 4, 2})).empty());
    CHECK(matcher.allocated().ranks.at(rank).cores == IdSet::range(0, 3));
    REQUIRE(queue.submit(2, Fixture::nodes(3, 100), 16, 2).ok());
    CHECK(pass(1).empty());  // job 1's node is busy
    REQUIRE(queue.free(1).ok());
    CHECK(pass(2) == Ids{2});
    // Nodes that come back smaller cannot hold job 2's R: job 2 is
    // reported, holds nothing, and can still be freed.
    CHECK(queue.reload(nodes({2, 2, 2})) == Ids{2});
    CHECK(matcher.allocated().ranks.empty());
    CHECK(queue.free(2).ok());
    // A node back with more cores is used whole.
    CHECK(queue.reload(nodes({8, 2, 2})).empty());
    REQUIRE(queue.submit(3, Fixture::nodes(1, 100), 16, 3).ok());
    CHECK(pass(3) == Ids{3});
    CHECK(matcher.allocated().ranks.at(0).cores == IdSet::range(0, 7));
}
