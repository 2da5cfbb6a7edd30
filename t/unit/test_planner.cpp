#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "sched/planner.hpp"

using namespace banyan;

TEST_CASE("planner: an empty planner has everything free", "[planner]") {
    Planner p(8);
    CHECK(p.idle());
    CHECK(p.avail(0, kForever) == 8);
    CHECK(p.used_at(100) == 0);
}

TEST_CASE("planner: spans add up where they overlap and nowhere else", "[planner]") {
    Planner p(10);
    p.add(0, 100, 4);
    p.add(50, 150, 3);
    CHECK(p.used_at(0) == 4);
    CHECK(p.used_at(49) == 4);
    CHECK(p.used_at(50) == 7);
    CHECK(p.used_at(100) == 3);
    CHECK(p.used_at(150) == 0);
    CHECK(p.max_used(0, 50) == 4);
    CHECK(p.max_used(0, 51) == 7);
    CHECK(p.avail(100, 200) == 7);
    CHECK(p.avail(150, kForever) == 10);
}

TEST_CASE("planner: giving spans back leaves it idle", "[planner]") {
    Planner p(4);
    p.add(10, 20, 1);
    p.add(0, kForever, 2);
    p.add(10, 20, -1);
    CHECK(p.used_at(15) == 2);
    p.add(0, kForever, -2);
    CHECK(p.idle());
}

TEST_CASE("planner: spans that touch do not overlap", "[planner]") {
    Planner p(2);
    p.add(0, 10, 2);
    p.add(10, 20, 2);
    CHECK(p.max_used(0, 20) == 2);
    CHECK(p.avail(9, 10) == 0);
    CHECK(p.avail(20, 30) == 2);
}

TEST_CASE("planner: an empty span or a zero amount changes nothing", "[planner]") {
    Planner p(4);
    p.add(10, 10, 3);
    p.add(20, 5, 3);
    p.add(0, 100, 0);
    CHECK(p.idle());
}

TEST_CASE("planner: a span to forever is in use at every later time", "[planner]") {
    Planner p(4);
    p.add(100, kForever, 3);
    CHECK(p.used_at(99) == 0);
    CHECK(p.used_at(kForever - 1) == 3);
    CHECK(p.avail(0, 100) == 4);
    CHECK(p.avail(0, 101) == 1);
    p.set_total(8);
    CHECK(p.avail(0, kForever) == 5);
}

TEST_CASE("planner: random spans agree with a count at every time", "[planner]") {
    // A planner against the plain sum over each time of a small horizon,
    // through adds and give-backs in random order.
    constexpr int64_t kHorizon = 64;
    uint64_t seed = 12345;
    auto next = [&](int64_t n) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        return static_cast<int64_t>((seed >> 33) % static_cast<uint64_t>(n));
    };
    for (int round = 0; round < 50; ++round) {
        Planner p(1000);
        std::vector<int64_t> used(kHorizon, 0);
        struct Span {
            int64_t start, end, amount;
        };
        std::vector<Span> held;
        for (int step = 0; step < 40; ++step) {
            if (!held.empty() && next(3) == 0) {
                size_t i = static_cast<size_t>(next(static_cast<int64_t>(held.size())));
                Span s = held[i];
                held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
                p.add(s.start, s.end, -s.amount);
                for (int64_t t = s.start; t < s.end; ++t)
                    used[static_cast<size_t>(t)] -= s.amount;
            } else {
                int64_t a = next(kHorizon), b = next(kHorizon);
                Span s{std::min(a, b), std::max(a, b) + 1, 1 + next(5)};
                held.push_back(s);
                p.add(s.start, s.end, s.amount);
                for (int64_t t = s.start; t < s.end; ++t)
                    used[static_cast<size_t>(t)] += s.amount;
            }
            int64_t from = next(kHorizon), to = from + 1 + next(kHorizon - from);
            int64_t most = *std::max_element(used.begin() + from, used.begin() + to);
            INFO("round " << round << " step " << step << " window [" << from << ", " << to << ")");
            REQUIRE(p.max_used(from, to) == most);
            for (int64_t t = 0; t < kHorizon; ++t)
                REQUIRE(p.used_at(t) == used[static_cast<size_t>(t)]);
        }
        for (const Span& s : held)
            p.add(s.start, s.end, -s.amount);
        CHECK(p.idle());
    }
}
