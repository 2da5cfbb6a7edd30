#include <catch2/catch.hpp>

#include "core/idset.hpp"

using namespace banyan;

TEST_CASE("idset parses and formats the canonical form", "[idset]") {
    struct Case {
        const char* in;
        const char* out;
        uint64_t count;
    };
    for (auto c : std::vector<Case>{
             {"", "", 0},
             {"0", "0", 1},
             {"0-3,7,9-11", "0-3,7,9-11", 8},
             {"[0-3]", "0-3", 4},
             {"3,2,1,0", "0-3", 4},
             {"0-3,4-7", "0-7", 8},
             {"5,5,5", "5", 1},
             {"1-10,3-4", "1-10", 10},
             {"007", "7", 1},
             {"4294967294", "4294967294", 1},
             {"0-4294967294", "0-4294967294", 4294967295ull},
         }) {
        INFO(c.in);
        auto set = IdSet::parse(c.in);
        REQUIRE(set.ok());
        CHECK(set->format() == c.out);
        CHECK(set->count() == c.count);
    }
}

TEST_CASE("idset rejects malformed input with a clear error", "[idset][malformed]") {
    for (const char* bad : {",",     "1,",   ",1", "1,,2", "-",   "-1",         "1-",
                            "3-1",   "a",    "1a", "1 ,2", " 1",  "1.5",        "+1",
                            "[1-2",  "1-2]", "[",  "]",    "[]x", "4294967295", "99999999999999999999",
                            "1-2-3", "0x10"}) {
        INFO(bad);
        auto set = IdSet::parse(bad);
        REQUIRE(!set.ok());
        CHECK(set.error().message.find("idset '") == 0);
    }
}

TEST_CASE("idset insert, erase, contains keep ranges canonical", "[idset]") {
    IdSet s;
    s.insert(5);
    s.insert(3);
    s.insert(4);
    CHECK(s.format() == "3-5");
    CHECK(s.ranges().size() == 1);
    s.erase(4);
    CHECK(s.format() == "3,5");
    CHECK(s.contains(3));
    CHECK(!s.contains(4));
    s.erase(3);
    s.erase(100);
    CHECK(s.format() == "5");
    s.insert_range(0, 10);
    CHECK(s.format() == "0-10");
    CHECK(s.first() == 0);
    CHECK(s.last() == 10);
    s.erase(0);
    s.erase(10);
    CHECK(s.format() == "1-9");
}

TEST_CASE("idset set algebra", "[idset]") {
    IdSet a = *IdSet::parse("0-9,20-29");
    IdSet b = *IdSet::parse("5-24,40");
    CHECK(a.union_with(b).format() == "0-29,40");
    CHECK(a.intersection(b).format() == "5-9,20-24");
    CHECK(a.difference(b).format() == "0-4,25-29");
    CHECK(b.difference(a).format() == "10-19,40");
    CHECK(a.difference(a).empty());
}

TEST_CASE("idset iterates in ascending order", "[idset]") {
    IdSet s = *IdSet::parse("9,0-2,5");
    CHECK(s.ids() == std::vector<uint32_t>{0, 1, 2, 5, 9});
    std::vector<uint32_t> seen;
    IdSet::range(4294967292u, 4294967294u).for_each([&](uint32_t id) { seen.push_back(id); });
    CHECK(seen == std::vector<uint32_t>{4294967292u, 4294967293u, 4294967294u});
}
