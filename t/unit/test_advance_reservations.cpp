// Advance reservations in the planners, driven through the queue as the
// scheduler drives it, on tiny.graphml: two nodes (ranks 0 and 1) of 36
// cores (doc/spec/reservations.md, sched.md §10).
#include <catch2/catch.hpp>

#include <filesystem>

#include <fmt/format.h>

#include "core/text_file.hpp"
#include "resource/grug.hpp"
#include "sched/sched_queue.hpp"

using namespace banyan;

namespace {

struct Fixture {
    std::unique_ptr<Matcher> matcher;
    std::unique_ptr<SchedQueue> queue;
    explicit Fixture(QueuePolicy policy = QueuePolicy::easy) {
        auto text = read_text_file(
            (std::filesystem::path(BANYAN_CONFORMANCE_DIR) / "fluxion" / "grugs" / "tiny.graphml").string());
        REQUIRE(text.ok());
        auto graph = read_grug(*text);
        REQUIRE(graph.ok());
        auto pack = MatchPolicy::create("pack");
        REQUIRE(pack.ok());
        matcher = std::make_unique<Matcher>(*graph, std::move(*pack));
        queue = std::make_unique<SchedQueue>(*matcher, QueueConfig{policy, 1000, 64, 60});
    }
    AdvanceReservations& reservations() { return matcher->reservations(); }
    // N whole nodes for `duration` seconds (0: no limit), in `reservation`.
    static Jobspec nodes(int n, int duration, const std::string& reservation = "") {
        std::string system = duration > 0 ? fmt::format("duration: {}", duration) : "";
        if (!reservation.empty())
            system += fmt::format("{}reservation: {}", system.empty() ? "" : ", ", reservation);
        auto js = Jobspec::parse(fmt::format(
            "{{version: 1, resources: [{{type: node, count: {}, exclusive: true, with: [{{type: slot, count: 1, "
            "label: t, with: [{{type: core, count: 1}}]}}]}}], tasks: [{{command: [app], slot: t, count: "
            "{{per_slot: 1}}}}], attributes: {{system: {{{}}}}}}}",
            n, system));
        REQUIRE(js.ok());
        return *js;
    }
    Result<void> submit(uint64_t id, int n, int duration, const std::string& reservation = "") {
        return queue->submit(id, nodes(n, duration, reservation), 16, static_cast<double>(id));
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
    IdSet ranks_of(uint64_t id) const {
        IdSet ranks;
        for (const auto& [rank, _] : matcher->to_rv1(matcher->job(id)->claims, 0, 0).ranks)
            ranks.insert(static_cast<uint32_t>(rank));
        return ranks;
    }
};

using Ids = std::vector<uint64_t>;

}  // namespace

TEST_CASE("advance reservations: backfill before the window only, and the reason says why",
          "[reservations]") {
    Fixture f;
    REQUIRE(f.reservations().add({"maint", 100, 200, IdSet::range(0, 1)}).ok());
    REQUIRE(f.submit(1, 1, 50).ok());   // ends before the window
    REQUIRE(f.submit(2, 1, 150).ok());  // would run into it
    REQUIRE(f.submit(3, 1, 0).ok());    // no time limit: never before it
    CHECK(f.pass(0) == Ids{1});
    REQUIRE(f.pending(2));
    CHECK(f.pending(2)->reason == "insufficient resources");
    CHECK(f.pending(2)->shown_reason().starts_with("waiting for reservation maint (starts "));
    REQUIRE(f.pending(2)->t_estimate);
    CHECK(*f.pending(2)->t_estimate == 200);  // at the reservation's end
    CHECK(f.pending(3)->shown_reason().starts_with("waiting for reservation maint"));
    // After it, both fit (job 1 gone).
    REQUIRE(f.queue->free(1).ok());
    CHECK(f.pass(200) == Ids{2, 3});
}

TEST_CASE("advance reservations: a job in one starts at its start, on its nodes only, and blocks no one",
          "[reservations]") {
    Fixture f(QueuePolicy::fcfs);
    REQUIRE(f.reservations().add({"course", 100, 1000, IdSet{1}}).ok());
    REQUIRE(f.submit(1, 1, 50, "course").ok());
    REQUIRE(f.submit(2, 1, 50, "course").ok());
    CHECK(f.submit(8, 2, 50, "course").error().code == ENOSPC);  // it has one node: never
    CHECK(f.submit(9, 1, 50, "nosuch").error().code == ENOENT);
    CHECK(f.pass(0).empty());
    CHECK(f.pending(1)->reason.starts_with("waiting for reservation course (starts "));
    REQUIRE(f.submit(3, 1, 0).ok());  // an ordinary job: rank 0, the one free for ever
    CHECK(f.pass(10) == Ids{3});
    CHECK(f.ranks_of(3) == IdSet{0});
    CHECK(f.pass(100) == Ids{1});
    CHECK(f.ranks_of(1) == IdSet{1});
    CHECK(f.pending(2)->reason == "insufficient resources in reservation course");
    // An ordinary job behind them still finds nothing: rank 1 is the
    // reservation's, rank 0 job 3's.
    REQUIRE(f.submit(4, 1, 10).ok());
    CHECK(f.pass(101).empty());
    REQUIRE(f.queue->free(3).ok());
    CHECK(f.pass(102) == Ids{4});
    // Job 1 ends; job 2 takes its place in the reservation.
    REQUIRE(f.queue->free(1).ok());
    CHECK(f.pass(103) == Ids{2});
    CHECK(f.ranks_of(2) == IdSet{1});
}

TEST_CASE("advance reservations: a job running in one counts once in the aggregates", "[reservations]") {
    Fixture f;
    REQUIRE(f.reservations().add({"r", 0, 100, IdSet{1}}).ok());
    REQUIRE(f.submit(1, 1, 50, "r").ok());
    CHECK(f.pass(0) == Ids{1});
    // Rank 0 is free: a job on one node fits beside it (the cluster's node
    // count must not see rank 1 as used twice).
    REQUIRE(f.submit(2, 1, 0).ok());
    CHECK(f.pass(1) == Ids{2});
    CHECK(f.ranks_of(2) == IdSet{0});
    // Deleted while job 1 runs: job 1 holds its node as any job, and the
    // node is free once it ends.
    REQUIRE(f.reservations().remove("r").ok());
    REQUIRE(f.submit(3, 1, 10).ok());
    CHECK(f.pass(2).empty());
    REQUIRE(f.queue->free(1).ok());
    CHECK(f.pass(3) == Ids{3});
    CHECK(f.ranks_of(3) == IdSet{1});
}

TEST_CASE("advance reservations: a running job restored before or after a reservation on its node is carved once",
          "[reservations]") {
    for (bool reservation_first : {true, false}) {
        INFO(reservation_first);
        Fixture f;
        Rv1 r;
        r.ranks[1].cores = IdSet::range(0, 35);
        if (reservation_first)
            REQUIRE(f.reservations().add({"r", 0, 100, IdSet{1}}).ok());
        REQUIRE(f.queue->restore(1, r, 0, 50).ok());
        if (!reservation_first)
            REQUIRE(f.reservations().add({"r", 0, 100, IdSet{1}}).ok());
        REQUIRE(f.submit(2, 1, 0).ok());
        CHECK(f.pass(1) == Ids{2});
        CHECK(f.ranks_of(2) == IdSet{0});
    }
}

TEST_CASE("advance reservations: nodes chosen by count are free for the whole window; overlaps refused",
          "[reservations]") {
    Fixture f;
    REQUIRE(f.submit(1, 1, 500).ok());
    CHECK(f.pass(0) == Ids{1});  // rank 0, until 500
    AdvanceReservations::Selection one{.count = 1};
    auto chosen = f.reservations().choose(one, 100, 200);
    REQUIRE(chosen.ok());
    CHECK(*chosen == IdSet{1});
    AdvanceReservations::Selection two{.count = 2};
    auto r = f.reservations().choose(two, 100, 200);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ENOSPC);
    CHECK(r.error().message == "only 1 of the 2 nodes asked for is free for the whole window");
    // After job 1's end both are free.
    CHECK(f.reservations().choose(two, 500, 600).ok());
    REQUIRE(f.reservations().add({"a", 100, 200, *chosen}).ok());
    auto overlap = f.reservations().add({"b", 150, 300, IdSet{1}});
    REQUIRE_FALSE(overlap.ok());
    CHECK(overlap.error().code == EBUSY);
    CHECK(overlap.error().message.find("is in reservation a from ") != std::string::npos);
    CHECK(f.reservations().add({"b", 200, 300, IdSet{1}}).ok());  // meets it end to start: no overlap
    CHECK(f.reservations().add({"a", 400, 500, IdSet{0}}).error().code == EEXIST);
    CHECK(f.reservations().add({"c", 400, 500, IdSet{7}}).error().code == ENOENT);
    AdvanceReservations::Selection unknown{.ranks = IdSet{5}};
    CHECK(f.reservations().choose(unknown, 100, 200).error().code == ENOENT);
    // A constraint alone: every node that meets it, busy or not; with a
    // count, that many of them that are free.
    AdvanceReservations::Selection by_rank{.constraint = *Constraint::from_json({{"ranks", {"0"}}})};
    auto busy = f.reservations().choose(by_rank, 100, 200);
    REQUIRE(busy.ok());
    CHECK(*busy == IdSet{0});
    AdvanceReservations::Selection both{.count = 1,
                                        .constraint = *Constraint::from_json({{"ranks", {"0-1"}}})};
    CHECK(*f.reservations().choose(both, 600, 700) == IdSet{0});       // after job 1, free
    CHECK(f.reservations().choose(both, 100, 200).error().code == ENOSPC);  // job 1 on 0, reservation a on 1
    // A constraint no node meets.
    AdvanceReservations::Selection gpu{.constraint = *Constraint::from_json({{"properties", {"gpu"}}})};
    auto none = f.reservations().choose(gpu, 100, 200);
    REQUIRE_FALSE(none.ok());
    CHECK(none.error().message == "no node satisfies 'gpu'");
}

TEST_CASE("advance reservations: removed, the nodes are free; a new graph keeps them", "[reservations]") {
    Fixture f;
    REQUIRE(f.reservations().add({"maint", 0, 1000, IdSet::range(0, 1)}).ok());
    REQUIRE(f.submit(1, 1, 10).ok());
    CHECK(f.pass(0).empty());
    auto text = read_text_file(
        (std::filesystem::path(BANYAN_CONFORMANCE_DIR) / "fluxion" / "grugs" / "tiny.graphml").string());
    auto graph = read_grug(*text);
    REQUIRE(graph.ok());
    f.queue->reload(*graph);
    CHECK(f.pass(1).empty());  // still reserved
    CHECK(f.reservations().remove("maint").ok());
    CHECK(f.reservations().remove("maint").error().code == ENOENT);
    CHECK(f.pass(2) == Ids{1});
}

TEST_CASE("advance reservations: under EASY, with the rest full, a job in one still starts", "[reservations]") {
    Fixture f(QueuePolicy::easy);
    REQUIRE(f.reservations().add({"r", 0, 1000, IdSet{1}}).ok());
    REQUIRE(f.submit(1, 1, 500).ok());
    CHECK(f.pass(0) == Ids{1});  // rank 0 full
    REQUIRE(f.submit(2, 1, 100).ok());       // blocked: nothing else is free
    REQUIRE(f.submit(3, 1, 100, "r").ok());  // behind it, in the reservation
    CHECK(f.pass(1) == Ids{3});
    CHECK(f.ranks_of(3) == IdSet{1});
    CHECK(f.pending(2)->reason == "insufficient resources");
}

TEST_CASE("advance reservations: a job in one that overruns keeps its node counted once", "[reservations]") {
    Fixture f(QueuePolicy::easy);
    REQUIRE(f.reservations().add({"r", 0, 1000, IdSet{1}}).ok());
    REQUIRE(f.submit(1, 1, 10, "r").ok());
    CHECK(f.pass(0) == Ids{1});
    // Past its end it holds its node 60 s more at each pass (prepare());
    // the reservation's carve-out moves with it.
    REQUIRE(f.submit(2, 1, 0).ok());
    CHECK(f.pass(20) == Ids{2});
    CHECK(f.ranks_of(2) == IdSet{0});
    REQUIRE(f.queue->free(1).ok());
    REQUIRE(f.queue->free(2).ok());
    // Both gone: the reservation holds rank 1 alone, whole, and rank 0 is free.
    REQUIRE(f.submit(3, 1, 0).ok());
    REQUIRE(f.submit(4, 1, 0).ok());
    CHECK(f.pass(30) == Ids{3});
    CHECK(f.ranks_of(3) == IdSet{0});
    CHECK(f.pending(4)->shown_reason().starts_with("waiting for reservation r"));
}

TEST_CASE("advance reservations: one made over a running job, or overrun into, counts the node once",
          "[reservations]") {
    Fixture f(QueuePolicy::easy);
    REQUIRE(f.submit(1, 1, 0).ok());  // rank 0 (pack), no end
    CHECK(f.pass(0) == Ids{1});
    REQUIRE(f.reservations().add({"over", 10, 1000, IdSet{0}}).ok());
    // Rank 1 is free for ever: a one-node job without a limit fits there
    // (the cluster's count must not see rank 0 twice).
    REQUIRE(f.submit(2, 1, 0).ok());
    CHECK(f.pass(1) == Ids{2});
    CHECK(f.ranks_of(2) == IdSet{1});
    REQUIRE(f.queue->free(1).ok());
    REQUIRE(f.queue->free(2).ok());
    // Ended, the reservation is whole again: rank 0 takes no job that runs
    // into it; rank 1 does.
    REQUIRE(f.submit(3, 1, 0).ok());
    REQUIRE(f.submit(4, 1, 0).ok());
    CHECK(f.pass(2) == Ids{3});
    CHECK(f.ranks_of(3) == IdSet{1});
}
