// The parts of the matcher on their own: the policies' orders and the
// allocation table (the walk itself is test_matcher's and the
// conformance cases').
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "resource/graph.hpp"
#include "sched/allocation_table.hpp"
#include "sched/match_policy.hpp"

using namespace banyan;

namespace {

// `n` nodes of `cores` cores each, in one socket, under one cluster.
ResourcePool cluster(uint32_t n, uint32_t cores) {
    std::vector<NodeDescription> nodes;
    for (uint32_t r = 0; r < n; r++)
        nodes.push_back(NodeDescription{r, fmt::format("n{}", r), {{IdSet::range(0, cores - 1), {}, 0}}});
    auto graph = ResourceGraph::from_nodes(nodes);
    REQUIRE(graph.ok());
    return ResourcePool(*graph);
}

// What a job holds of one core of rank `rank`'s node: the core, and its
// socket and node as shared parents.
std::vector<Claim> one_core(const ResourcePool& pool, int32_t rank, int64_t core = 0) {
    uint32_t node = *pool.node_of_rank(rank);
    uint32_t socket = pool.children(node)[0];
    uint32_t c = pool.children(socket)[static_cast<size_t>(core)];
    return {{node, 1, false, false, true}, {socket, 1, false, false, true}, {c, 1, true, true, true}};
}

std::unique_ptr<MatchPolicy> make(std::string_view name) {
    auto p = MatchPolicy::create(name);
    REQUIRE(p.ok());
    return std::move(*p);
}

// The order `policy` offers the root's children (nodes) in, as ranks.
std::vector<int32_t> order(const MatchPolicy& policy, const ResourcePool& pool, int64_t want, bool now,
                           const std::vector<uint64_t>* eligible = nullptr) {
    uint32_t root = pool.roots()[0];
    TypeId core = *pool.find_type("core");
    Siblings s{.pool = pool,
               .parent = root,
               .kids = pool.children(root),
               .type = core,
               .want = want,
               .start = 0,
               .end = 100,
               .ignore_use = false,
               .free_now = now ? pool.free_children(root, core) : std::span<const uint64_t>(),
               .eligible = eligible};
    std::vector<int32_t> ranks;
    policy.visit_in_order(s, [&](uint32_t u) {
        ranks.push_back(pool.rank(u));
        return true;
    });
    return ranks;
}

}  // namespace

TEST_CASE("match policy: every known name makes its policy, an unknown one is refused naming the known",
          "[match_policy]") {
    for (const auto& name : MatchPolicy::names())
        CHECK(make(name)->name() == name);
    auto bad = MatchPolicy::create("best");
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().code == EINVAL);
    CHECK(bad.error().message ==
          "unknown match policy 'best' (known: pack, first, low, high, lonode, hinode, "
          "lonodex, hinodex, locality)");
    CHECK(make("lonodex")->traits().node_exclusive);
    CHECK_FALSE(make("lonode")->traits().node_exclusive);
    CHECK(make("low")->traits().scores_by_id);
    CHECK_FALSE(make("pack")->traits().slot_at_holder);
    CHECK(make("first")->traits().slot_at_holder);
}

TEST_CASE("match policy: by id, low first or high first; a stop ends the walk", "[match_policy]") {
    ResourcePool pool = cluster(4, 2);
    CHECK(order(*make("lonode"), pool, 1, false) == std::vector<int32_t>{0, 1, 2, 3});
    CHECK(order(*make("hinode"), pool, 1, false) == std::vector<int32_t>{3, 2, 1, 0});
    CHECK(make("high")->by_id_before(5, 3));
    CHECK(make("low")->by_id_before(3, 5));
    std::vector<int32_t> seen;
    make("pack")->visit_in_order(Siblings{.pool = pool,
                                          .parent = pool.roots()[0],
                                          .kids = pool.children(pool.roots()[0]),
                                          .type = *pool.find_type("core"),
                                          .want = 1,
                                          .start = 0,
                                          .end = 100,
                                          .ignore_use = false,
                                          .free_now = {},
                                          .eligible = nullptr},
                                 [&](uint32_t u) {
                                     seen.push_back(pool.rank(u));
                                     return seen.size() < 2;
                                 });
    CHECK(seen == std::vector<int32_t>{0, 1});
}

TEST_CASE("match policy: by id, now, a wide parent offers only children with something free and eligible",
          "[match_policy]") {
    // 40 nodes: the cluster keeps free-children bitmaps (32 children or more).
    ResourcePool pool = cluster(40, 1);
    AllocationTable table(pool);
    REQUIRE(table.add(1, {one_core(pool, 3), 0, 100, false}).ok());
    auto low = order(*make("lonode"), pool, 1, true);
    CHECK(low.size() == 39);
    CHECK(std::find(low.begin(), low.end(), 3) == low.end());
    CHECK(low.front() == 0);
    CHECK(order(*make("hinode"), pool, 1, true).front() == 39);
    // A constraint's bitmap (one word for 40 children): nodes 3, 5 and 38;
    // 3 has nothing free.
    std::vector<uint64_t> eligible{uint64_t{1} << 3 | uint64_t{1} << 5 | uint64_t{1} << 38};
    CHECK(order(*make("lonode"), pool, 1, true, &eligible) == std::vector<int32_t>{5, 38});
}

TEST_CASE("match policy: locality offers the tightest child that holds all first, then the fullest", "[match_policy]") {
    ResourcePool pool = cluster(4, 4);
    AllocationTable table(pool);
    // Free cores: n0 4, n1 1, n2 2, n3 3.
    uint64_t id = 1;
    for (auto [rank, used] : {std::pair{1, 3}, {2, 2}, {3, 1}})
        for (int64_t c = 0; c < used; ++c)
            REQUIRE(table.add(id++, {one_core(pool, rank, c), 0, 100, false}).ok());
    CHECK(order(*make("locality"), pool, 2, false) == std::vector<int32_t>{2, 3, 0, 1});
    CHECK(order(*make("locality"), pool, 5, false) == std::vector<int32_t>{0, 3, 2, 1});
}

TEST_CASE("match policy: first offers untouched children, later first, before those jobs took from", "[match_policy]") {
    ResourcePool pool = cluster(4, 4);
    auto first = make("first");
    first->graph_changed(pool);
    CHECK(order(*first, pool, 1, false) == std::vector<int32_t>{3, 2, 1, 0});
    AllocationTable table(pool);
    auto claims = one_core(pool, 3);
    REQUIRE(table.add(1, {claims, 0, 100, false}).ok());
    first->matched(pool, claims);
    CHECK(order(*first, pool, 1, false) == std::vector<int32_t>{2, 1, 0, 3});
}

TEST_CASE("match policy: first, now, under a wide parent offers only children free and eligible, in its order",
          "[match_policy]") {
    // 70 nodes of 2 cores (two bitmap words): node 3 full, node 66 half
    // used (touched: it comes after every untouched node).
    ResourcePool pool = cluster(70, 2);
    auto first = make("first");
    first->graph_changed(pool);
    AllocationTable table(pool);
    uint64_t id = 1;
    for (int64_t c = 0; c < 2; ++c) {
        auto claims = one_core(pool, 3, c);
        REQUIRE(table.add(id++, {claims, 0, 100, false}).ok());
        first->matched(pool, claims);
    }
    auto claims = one_core(pool, 66);
    REQUIRE(table.add(id++, {claims, 0, 100, false}).ok());
    first->matched(pool, claims);
    auto all = order(*first, pool, 1, true);
    CHECK(all.size() == 69);  // not node 3
    CHECK(all.front() == 69);
    CHECK(all.back() == 66);
    // A constraint's bitmap: nodes 2, 3, 40 and 66 (3 has nothing free).
    std::vector<uint64_t> eligible{uint64_t{1} << 2 | uint64_t{1} << 3 | uint64_t{1} << 40, uint64_t{1} << 2};
    CHECK(order(*first, pool, 1, true, &eligible) == std::vector<int32_t>{40, 2, 66});
}

TEST_CASE("allocation table: what it holds is what the pool has in use, and back", "[allocation_table]") {
    ResourcePool pool = cluster(2, 2);
    AllocationTable table(pool);
    uint32_t root = pool.roots()[0];
    TypeId core = *pool.find_type("core");
    REQUIRE(table.add(7, {one_core(pool, 0), 0, 50, false}).ok());
    REQUIRE(table.add(8, {one_core(pool, 1), 0, 80, false}).ok());
    CHECK(pool.avail(root, core, 0, 10) == 2);
    CHECK(table.add(7, {one_core(pool, 0, 1), 0, 10, false}).error().code == EEXIST);
    CHECK(table.release_times(0) == std::vector<int64_t>{50, 80});
    CHECK(table.release_times(50) == std::vector<int64_t>{80});
    REQUIRE(table.extend(7, 90).ok());
    CHECK(table.release_times(0) == std::vector<int64_t>{80, 90});
    CHECK(pool.avail(root, core, 85, 86) == 3);
    REQUIRE(table.remove(7).ok());
    REQUIRE(table.remove(8).ok());
    CHECK(table.remove(8).error().code == ENOENT);
    CHECK(pool.avail(root, core, 0, kForever) == 4);
    CHECK(table.all().empty());
}

TEST_CASE("allocation table: a reservation is planned, not in use, until it starts", "[allocation_table]") {
    ResourcePool pool = cluster(1, 1);
    AllocationTable table(pool);
    uint32_t root = pool.roots()[0];
    TypeId core = *pool.find_type("core");
    REQUIRE(table.add(1, {one_core(pool, 0), 100, 160, true}).ok());
    CHECK(pool.free_now(root, core) == 1);
    CHECK(pool.avail(root, core, 100, 101) == 0);
    CHECK(table.extend(1, 200).error().code == ENOENT);
    REQUIRE(table.start_reserved(1, 30).ok());
    CHECK(table.find(1)->start == 30);
    CHECK(table.find(1)->end == 90);
    CHECK(pool.free_now(root, core) == 0);
    CHECK(pool.avail(root, core, 100, 101) == 1);
    CHECK(table.start_reserved(1, 40).error().code == ENOENT);
}

TEST_CASE("allocation table: giving back some ranks keeps the rest; the last gives back all", "[allocation_table]") {
    ResourcePool pool = cluster(2, 1);
    AllocationTable table(pool);
    auto claims = one_core(pool, 0);
    auto more = one_core(pool, 1);
    claims.insert(claims.end(), more.begin(), more.end());
    REQUIRE(table.add(1, {claims, 0, 100, false}).ok());
    auto partly = table.remove_ranks(1, IdSet::parse("1").value());
    REQUIRE(partly.ok());
    CHECK_FALSE(*partly);
    CHECK(table.find(1)->claims.size() == 3);
    CHECK(pool.free_now(*pool.node_of_rank(1), *pool.find_type("core")) == 1);
    auto all = table.remove_ranks(1, IdSet::parse("0").value());
    REQUIRE(all.ok());
    CHECK(*all);
    CHECK(table.find(1) == nullptr);
    CHECK(table.release_times(0).empty());
}
