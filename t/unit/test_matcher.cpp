#include <catch2/catch.hpp>

#include <filesystem>

#include <fmt/format.h>

#include "core/text_file.hpp"
#include "resource/grug.hpp"
#include "resource/synthetic.hpp"
#include "sched/job_request.hpp"
#include "sched/preemption.hpp"
#include "sched/matcher.hpp"

using namespace banyan;
namespace fs = std::filesystem;

namespace {

const fs::path kGrugs = fs::path(BANYAN_CONFORMANCE_DIR) / "fluxion" / "grugs";

Matcher load(const std::string& grug, const std::string& policy) {
    auto text = read_text_file((kGrugs / (grug + ".graphml")).string());
    REQUIRE(text.ok());
    auto graph = read_grug(*text);
    REQUIRE(graph.ok());
    auto p = MatchPolicy::create(policy);
    REQUIRE(p.ok());
    return Matcher(*graph, std::move(*p));
}

Jobspec spec(const std::string& resources, int duration = 3600) {
    std::string text = fmt::format(
        "version: 9999\nresources:\n{}\nattributes:\n  system:\n    duration: {}\n"
        "tasks:\n  - command: [app]\n    slot: default\n    count:\n      per_slot: 1\n",
        resources, duration);
    auto js = Jobspec::parse(text);
    INFO(text << (js ? "" : js.error().message));
    REQUIRE(js.ok());
    return *js;
}

// "node1/core35" for each shown vertex of `type`, in graph order.
std::string picked(const Matcher& m, const MatchResult& r, const std::string& type = "core") {
    const ResourcePool& pool = m.pool();
    std::vector<uint32_t> vs;
    for (const Claim& c : r.claims)
        if (c.shown && pool.type_name(pool.type(c.vertex)) == type)
            vs.push_back(c.vertex);
    std::sort(vs.begin(), vs.end());
    std::vector<std::string> out;
    for (uint32_t v : vs) {
        uint32_t node = v;
        while (node != kNoVertex && pool.type_name(pool.type(node)) != "node")
            node = pool.parent(node);
        out.push_back(node == kNoVertex || node == v ? pool.name(v) : pool.name(node) + "/" + pool.name(v));
    }
    return fmt::format("{}", fmt::join(out, " "));
}

MatchResult must_match(Matcher& m, const Jobspec& js, uint64_t jobid, MatchOp op = MatchOp::allocate) {
    auto r = m.match(js, op, 0, jobid);
    REQUIRE(r.ok());
    return *r;
}

const char* kSlotSocketCore =
    "  - type: slot\n    count: 1\n    label: default\n    with:\n"
    "      - type: socket\n        count: 1\n        with:\n          - type: core\n            count: 1";

}  // namespace

TEST_CASE("matcher: hinode takes the highest ids, node first; a slot holds its socket whole", "[matcher]") {
    Matcher m = load("tiny", "hinode");
    Jobspec js = spec(kSlotSocketCore);
    CHECK(picked(m, must_match(m, js, 1)) == "node1/core35");
    CHECK(picked(m, must_match(m, js, 2)) == "node1/core17");
    CHECK(picked(m, must_match(m, js, 3)) == "node0/core35");
    CHECK(picked(m, must_match(m, js, 4)) == "node0/core17");
    // All four sockets are held by a slot each: nothing more fits.
    MatchResult fifth = must_match(m, js, 5);
    CHECK_FALSE(fifth.matched);
    CHECK_FALSE(fifth.unsatisfiable);
}

TEST_CASE("matcher: first takes the node with the most cores free, the later one on a tie", "[matcher]") {
    // Fluxion's default: a fresh graph is walked from the highest ids, and
    // jobs spread over the nodes.
    Matcher m = load("tiny", "first");
    Jobspec js = spec(kSlotSocketCore);
    CHECK(picked(m, must_match(m, js, 1)) == "node1/core35");
    CHECK(picked(m, must_match(m, js, 2)) == "node0/core35");
    CHECK(picked(m, must_match(m, js, 3)) == "node1/core17");
    CHECK(picked(m, must_match(m, js, 4)) == "node0/core17");
}

TEST_CASE("matcher: lonode takes the lowest ids, node first", "[matcher]") {
    Matcher m = load("tiny", "lonode");
    Jobspec js = spec(kSlotSocketCore);
    CHECK(picked(m, must_match(m, js, 1)) == "node0/core0");
    CHECK(picked(m, must_match(m, js, 2)) == "node0/core18");
    CHECK(picked(m, must_match(m, js, 3)) == "node1/core0");
}

TEST_CASE("matcher: low and high score each slot by its own ids, across the nodes", "[matcher]") {
    // The jobspec names no node: Fluxion's low and high compare every
    // socket of the cluster by id (a tie goes to the earlier in the graph),
    // so jobs alternate between the nodes.
    Matcher low = load("tiny", "low");
    Jobspec js = spec(kSlotSocketCore);
    CHECK(picked(low, must_match(low, js, 1)) == "node0/core0");
    CHECK(picked(low, must_match(low, js, 2)) == "node1/core0");
    CHECK(picked(low, must_match(low, js, 3)) == "node0/core18");
    CHECK(picked(low, must_match(low, js, 4)) == "node1/core18");
    Matcher high = load("tiny", "high");
    CHECK(picked(high, must_match(high, js, 1)) == "node0/core35");
    CHECK(picked(high, must_match(high, js, 2)) == "node1/core35");
    CHECK(picked(high, must_match(high, js, 3)) == "node0/core17");
    CHECK(picked(high, must_match(high, js, 4)) == "node1/core17");
    CHECK_FALSE(must_match(high, js, 5).matched);
}

TEST_CASE("matcher: node-exclusive policies give whole nodes", "[matcher]") {
    Matcher m = load("tiny", "lonodex");
    Jobspec js = spec(kSlotSocketCore);
    MatchResult a = must_match(m, js, 1);
    REQUIRE(a.matched);
    Rv1 r = m.to_rv1(a.claims, a.start, a.end);
    REQUIRE(r.ranks.size() == 1);
    CHECK(r.ranks.begin()->first == 0);
    CHECK(r.ranks.begin()->second.cores.count() == 36);
    CHECK(r.ranks.begin()->second.gpus.count() == 2);
    CHECK(picked(m, must_match(m, js, 2)).find("node1/core0") == 0);
    CHECK_FALSE(must_match(m, js, 3).matched);
    // hinodex starts from the top.
    Matcher h = load("tiny", "hinodex");
    CHECK(picked(h, must_match(h, js, 1)).find("node1/core0 ") == 0);
}

TEST_CASE("matcher: exclusive node asked for in the jobspec lists every core", "[matcher]") {
    Matcher m = load("tiny", "lonode");
    Jobspec js = spec(
        "  - type: node\n    count: 1\n    exclusive: true\n    with:\n"
        "      - type: slot\n        count: 1\n        label: default\n        with:\n"
        "          - type: core\n            count: 2");
    MatchResult a = must_match(m, js, 1);
    CHECK(m.to_rv1(a.claims, 0, 0).ranks.at(0).cores.count() == 36);
    MatchResult b = must_match(m, js, 2);
    CHECK(m.to_rv1(b.claims, 0, 0).ranks.count(1) == 1);
    CHECK_FALSE(must_match(m, js, 3).matched);
}

TEST_CASE("matcher: reservations start when the earlier jobs end", "[matcher]") {
    Matcher m = load("tiny", "hinode");
    Jobspec js = spec(
        "  - type: slot\n    count: 1\n    label: default\n    with:\n"
        "      - type: socket\n        count: 1\n        with:\n"
        "          - type: core\n            count: 18");
    std::vector<int64_t> starts;
    for (uint64_t id = 1; id <= 10; ++id) {
        MatchResult r = must_match(m, js, id, MatchOp::allocate_orelse_reserve);
        REQUIRE(r.matched);
        CHECK(r.reserved == (id > 4));
        starts.push_back(r.start);
    }
    CHECK(starts == std::vector<int64_t>{0, 0, 0, 0, 3600, 3600, 3600, 3600, 7200, 7200});
    // Cancelling a running job lets a reservation-free match fit now.
    REQUIRE(m.cancel(2).ok());
    MatchResult now = must_match(m, js, 11);
    CHECK(now.matched);
    CHECK(picked(m, now).find("node1/core0 ") == 0);  // the socket job 2 held
    CHECK(m.cancel(2).error().code == ENOENT);
}

TEST_CASE("matcher: satisfiability ignores what is in use, not what is down", "[matcher]") {
    Matcher m = load("tiny", "first");
    Jobspec too_big = spec(
        "  - type: slot\n    count: 1\n    label: default\n    with:\n"
        "      - type: socket\n        count: 1\n        with:\n"
        "          - type: core\n            count: 19");
    MatchResult r = must_match(m, too_big, 1, MatchOp::allocate_with_satisfiability);
    CHECK_FALSE(r.matched);
    CHECK(r.unsatisfiable);
    Jobspec two_nodes = spec(
        "  - type: node\n    count: 2\n    with:\n      - type: slot\n        count: 1\n"
        "        label: default\n        with:\n          - type: core\n            count: 1");
    REQUIRE(must_match(m, two_nodes, 2).matched);
    MatchResult busy = must_match(m, spec(kSlotSocketCore), 3, MatchOp::satisfiability);
    CHECK(busy.matched);
    // With node1 down, two nodes can never be had.
    uint32_t node1 = *m.pool().node_of_rank(1);
    for (uint32_t v = node1; v < m.pool().subtree_end(node1); ++v)
        m.pool().set_status(v, VertexStatus::down);
    CHECK(must_match(m, two_nodes, 4, MatchOp::satisfiability).unsatisfiable);
    CHECK(must_match(m, spec("  - type: node\n    count: 1\n    with:\n      - type: core\n        count: 1"), 5,
                     MatchOp::satisfiability)
              .matched);
}

// As Fluxion's dom_slot: a slot's member takes each vertex it picks whole
// (its granule), counting all of it, until the amount asked is covered.
TEST_CASE("matcher: a slot takes memory pools whole, as Fluxion does", "[matcher]") {
    Matcher m = load("tiny", "low");
    MatchResult r = must_match(m,
                               spec("  - type: slot\n    count: 1\n    label: default\n    with:\n"
                                    "      - type: memory\n        count: 5"),
                               1);
    REQUIRE(r.matched);
    std::vector<std::pair<std::string, int64_t>> taken;
    for (const Claim& c : r.claims)
        if (c.shown && m.pool().type_name(m.pool().type(c.vertex)) == "memory")
            taken.emplace_back(m.pool().name(c.vertex), c.amount);
    CHECK(taken == std::vector<std::pair<std::string, int64_t>>{{"memory0", 2}, {"memory1", 2}, {"memory2", 2}});
}

TEST_CASE("matcher: count ranges take the most that fits within max", "[matcher]") {
    Matcher m = load("tiny", "low");
    Jobspec range = spec(
        "  - type: node\n    count:\n      min: 1\n      max: 4\n      operator: '+'\n"
        "      operand: 1\n    with:\n      - type: core\n        count: 1");
    CHECK(picked(m, must_match(m, range, 1), "node") == "node0 node1");
    REQUIRE(m.cancel(1).ok());
    Jobspec three = spec(
        "  - type: node\n    count:\n      min: 3\n      max: 4\n      operator: '+'\n      operand: 1\n    with:\n"
        "      - type: core\n        count: 1");
    MatchResult r = must_match(m, three, 2, MatchOp::allocate_with_satisfiability);
    CHECK_FALSE(r.matched);
    CHECK(r.unsatisfiable);
}

TEST_CASE("matcher: a jobspec may leave out cluster and rack", "[matcher]") {
    Matcher m = load("small", "hinode");
    MatchResult r = must_match(m, spec("  - type: core\n    count: 3"), 1);
    REQUIRE(r.matched);
    CHECK(picked(m, r) == "node7/core33 node7/core34 node7/core35");
    // high compares the cores of all nodes by id alone.
    Matcher h = load("small", "high");
    CHECK(picked(h, must_match(h, spec("  - type: core\n    count: 3"), 1)) ==
          "node0/core35 node1/core35 node2/core35");
    // The walked-through vertices are shared.
    for (const Claim& c : r.claims)
        if (m.pool().type_name(m.pool().type(c.vertex)) != "core")
            CHECK_FALSE(c.exclusive);
}

TEST_CASE("matcher: locality packs into the tightest subtree that fits", "[matcher]") {
    Matcher m = load("tiny", "locality");
    Jobspec ten = spec(
        "  - type: slot\n    count: 1\n    label: default\n    with:\n      - type: core\n"
        "        count: 10");
    MatchResult a = must_match(m, ten, 1);
    REQUIRE(a.matched);
    // node0 now has 8 free on one socket and 18 on the other: 8 cores go to
    // the 8 left, not to the empty socket or the empty node.
    MatchResult b = must_match(m,
                               spec("  - type: slot\n    count: 1\n    label: default\n    with:\n"
                                    "      - type: core\n        count: 8"),
                               2);
    REQUIRE(b.matched);
    std::string first_core = picked(m, a).substr(0, picked(m, a).find(' '));
    std::string node = first_core.substr(0, first_core.find('/'));
    CHECK(picked(m, b).find(node + "/") == 0);
    CHECK(picked(m, b).find(' ') != std::string::npos);
}

TEST_CASE("matcher: medium has 72 nodes; 73 is unsatisfiable", "[matcher]") {
    Matcher m = load("medium", "first");
    auto nodes = [](int n) {
        return spec(
            fmt::format("  - type: node\n    count: {}\n    with:\n      - type: slot\n        count: 1\n"
                        "        label: default\n        with:\n          - type: core\n            count: 1",
                        n));
    };
    CHECK(must_match(m, nodes(72), 1).matched);
    MatchResult r = must_match(m, nodes(73), 2, MatchOp::allocate_orelse_reserve);
    CHECK_FALSE(r.matched);
    CHECK(r.unsatisfiable);
}

TEST_CASE("matcher: resv_test reserves a job behind a full machine", "[matcher]") {
    Matcher m = load("resv_test", "first");
    Jobspec one_node = spec(
        "  - type: node\n    count: 1\n    exclusive: true\n    with:\n"
        "      - type: core\n        count: 1",
        3600);
    for (uint64_t id = 1; id <= 108; ++id)
        REQUIRE(must_match(m, one_node, id).matched);
    CHECK_FALSE(must_match(m, one_node, 109).matched);
    Jobspec ten = spec("  - type: node\n    count: 10\n    with:\n      - type: core\n        count: 1", 600);
    MatchResult r = must_match(m, ten, 110, MatchOp::allocate_orelse_reserve);
    REQUIRE(r.matched);
    CHECK(r.reserved);
    CHECK(r.start == 3600);
    CHECK(r.end == 4200);
    // Freeing a node does not help a 10-node job; freeing ten does, now.
    for (uint64_t id = 1; id <= 10; ++id)
        REQUIRE(m.cancel(id).ok());
    MatchResult now = must_match(m, ten, 111);
    CHECK(now.matched);
    CHECK(now.start == 0);
}

TEST_CASE("matcher: a type the graph lacks is unsatisfiable, with the reason", "[matcher]") {
    Matcher m = load("tiny", "first");
    MatchResult r = must_match(m, spec("  - type: quantum\n    count: 1"), 1);
    CHECK(r.unsatisfiable);
    CHECK(r.reason.find("quantum") != std::string::npos);
    CHECK(m.match(spec(kSlotSocketCore), MatchOp::allocate, 0, 2).ok());
    CHECK(m.match(spec(kSlotSocketCore), MatchOp::allocate, 0, 2).error().code == EEXIST);
}

namespace {

// A matcher over a synthetic cluster as Banyan builds its graphs (memory
// in MiB), pools shared as the scheduler service shares them.
std::unique_ptr<Matcher> synthetic_matcher(const std::string& cluster) {
    auto nodes = parse_synthetic_cluster(cluster);
    REQUIRE(nodes.ok());
    auto graph = ResourceGraph::from_nodes(*nodes);
    REQUIRE(graph.ok());
    auto p = MatchPolicy::create("first");
    REQUIRE(p.ok());
    auto m = std::make_unique<Matcher>(*graph, std::move(*p));
    m->share_pools(true);
    return m;
}

// Two nodes of 4 cores and 10 GiB.
std::unique_ptr<Matcher> memory_cluster() {
    return synthetic_matcher("node[0-1]: core:4,memory:10G");
}

// The jobspec banyan submit makes of `r` (one task of one core unless
// changed).
Jobspec submitted(JobRequest r) {
    r.command = {"app"};
    auto json = build_jobspec(r, [](JobField) -> std::string { return "field"; });
    REQUIRE(json.ok());
    auto js = Jobspec::from_json(*json, JobspecRules::v1);
    INFO(json->dump());
    REQUIRE(js.ok());
    return *js;
}

}  // namespace

TEST_CASE("matcher: memory per node packs like cores; two 60% jobs never share a node", "[matcher][memory]") {
    auto cluster = memory_cluster();
    Matcher& m = *cluster;
    Jobspec six = submitted({.memory_per_node = 6ull << 30, .time_limit = 3600});
    MatchResult a = must_match(m, six, 1), b = must_match(m, six, 2);
    REQUIRE(a.matched);
    REQUIRE(b.matched);
    Rv1 ra = m.to_rv1(a.claims, a.start, a.end, Matcher::RMemory::written);
    Rv1 rb = m.to_rv1(b.claims, b.start, b.end, Matcher::RMemory::written);
    REQUIRE(ra.ranks.size() == 1);
    REQUIRE(rb.ranks.size() == 1);
    CHECK(ra.ranks.begin()->first != rb.ranks.begin()->first);
    CHECK(ra.ranks.begin()->second.memory == 6ull << 30);
    // Cores are free on both nodes, memory on neither: a third waits.
    MatchResult c = must_match(m, six, 3, MatchOp::allocate_orelse_reserve);
    CHECK(c.reserved);
    CHECK(c.start == a.end);
    // Fluxion's R (banyan-sched-query) has no memory.
    CHECK(m.to_rv1(a.claims, a.start, a.end).ranks.begin()->second.memory == 0);
    // R carries it as bytes, and reads back.
    auto back = Rv1::from_json(ra.to_json());
    REQUIRE(back.ok());
    CHECK(*back == ra);
}

TEST_CASE("matcher: memory per core is the slot's, on whichever node the task goes", "[matcher][memory]") {
    auto cluster = memory_cluster();
    Matcher& m = *cluster;
    MatchResult r = must_match(m, submitted({.ntasks = 4, .cores_per_task = 2, .memory_per_core = 1ull << 30}), 1);
    INFO(r.reason);
    REQUIRE(r.matched);
    uint64_t total = 0;
    for (const auto& [rank, children] : m.to_rv1(r.claims, r.start, r.end, Matcher::RMemory::written).ranks) {
        CHECK(children.memory == children.cores.count() * (1ull << 30));
        total += children.memory;
    }
    CHECK(total == 8ull << 30);
    // What no node has is refused, in bytes.
    auto too_much = m.could_ever_fit(submitted({.memory_per_node = 11ull << 30}));
    REQUIRE_FALSE(too_much.ok());
    CHECK(too_much.error().message ==
          "unsatisfiable: a task needs 11 GiB of memory on one node; the largest node has 10 GiB");
}

TEST_CASE("matcher: a restarted scheduler holds a running job's memory again", "[matcher][memory]") {
    auto cluster = memory_cluster();
    Matcher& m = *cluster;
    Rv1 r;
    r.ranks[0] = {IdSet{0}, IdSet{}, 6ull << 30};
    REQUIRE(m.allocate_exact(7, r, 0, 3600).ok());
    // Node 0 keeps only 4 GiB: the next 6 GiB job goes to node 1.
    MatchResult next = must_match(m, submitted({.memory_per_node = 6ull << 30}), 8);
    REQUIRE(next.matched);
    CHECK(m.to_rv1(next.claims, next.start, next.end).ranks.begin()->first == 1);
    // More than a node has free is an error naming it.
    Rv1 over;
    over.ranks[1] = {IdSet{1}, IdSet{}, 5ull << 30};
    auto refused = m.allocate_exact(9, over, 0, 3600);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().message == "rank 1 lacks 1 GiB of free memory");
}

TEST_CASE("matcher: a whole node's memory is held, but only what was asked is R's", "[matcher][memory]") {
    auto cluster = memory_cluster();
    Matcher& m = *cluster;
    MatchResult plain = must_match(m, submitted({.exclusive = true}), 1);
    MatchResult asked = must_match(m, submitted({.memory_per_node = 4ull << 30, .exclusive = true}), 2);
    REQUIRE(plain.matched);
    REQUIRE(asked.matched);
    auto memory_of = [&](const MatchResult& r) {
        return m.to_rv1(r.claims, r.start, r.end, Matcher::RMemory::written).ranks.begin()->second.memory;
    };
    CHECK(memory_of(plain) == 0);  // not limited
    CHECK(memory_of(asked) == 4ull << 30);
    // Both nodes are held whole, memory and all.
    CHECK_FALSE(must_match(m, submitted({.memory_per_node = 1ull << 20}), 3).matched);
}

TEST_CASE("preemption: the fewest victims, lowest tier and latest start first; all held after", "[matcher][preempt]") {
    auto cluster = synthetic_matcher("node[0-1]: core:2");
    Matcher& m = *cluster;
    // Jobs 1 and 2 on one node, 3 and 4 on the other, started in that order.
    Jobspec core = submitted({.time_limit = 3600});
    for (uint64_t id = 1; id <= 4; ++id)
        REQUIRE(must_match(m, core, id, MatchOp::allocate).matched);
    std::map<uint64_t, int32_t> node_of;
    for (uint64_t id = 1; id <= 4; ++id) {
        Matcher::Job held = *m.job(id);
        node_of[id] = m.to_rv1(held.claims, held.start, held.end).ranks.begin()->first;
    }
    Jobspec whole = submitted({.nodes = 1, .exclusive = true, .time_limit = 60});
    // Restart the jobs at their start times: 1 and 2 earlier than 3 and 4.
    std::map<uint64_t, Matcher::Job> kept;
    for (uint64_t id = 1; id <= 4; ++id) {
        kept[id] = *m.job(id);
        REQUIRE(m.cancel(id).ok());
    }
    for (uint64_t id = 1; id <= 4; ++id) {
        kept[id].start = static_cast<int64_t>(10 * id);
        REQUIRE(m.put_back(id, kept[id]).ok());
    }
    auto same_node_pair = [&](std::vector<uint64_t> v) {
        std::sort(v.begin(), v.end());
        return v.size() == 2 && node_of[v[0]] == node_of[v[1]];
    };
    std::vector<PreemptionCandidate> all{{1, 0}, {2, 0}, {3, 0}, {4, 0}};
    auto victims = choose_victims(m, whole, all, 100);
    CHECK(same_node_pair(victims));
    CHECK(std::count(victims.begin(), victims.end(), 4) == 1);  // the latest started
    for (uint64_t id = 1; id <= 4; ++id)
        CHECK(m.job(id) != nullptr);  // all still held
    CHECK_FALSE(m.job(9));
    // A lower tier goes first, whatever the starts.
    auto low_first = choose_victims(m, whole, {{1, 0}, {2, 0}, {3, 5}, {4, 5}}, 100);
    CHECK(same_node_pair(low_first));
    CHECK(std::count(low_first.begin(), low_first.end(), 2) == 1);
    // Not enough to free: none taken.
    CHECK(choose_victims(m, submitted({.nodes = 2, .exclusive = true, .time_limit = 60}), {{1, 0}}, 100).empty());
}
