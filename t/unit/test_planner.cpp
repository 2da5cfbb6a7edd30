#include <catch2/catch.hpp>

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
