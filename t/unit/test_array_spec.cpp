// --array's indexes and throttle (doc/spec/arrays.md §1).
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "sched/array_spec.hpp"

using namespace banyan;

TEST_CASE("array spec: ranges, lists, steps and a throttle", "[array]") {
    auto a = ArraySpec::parse("1-100%10");
    REQUIRE(a.ok());
    CHECK(a->indexes == IdSet::range(1, 100));
    CHECK(a->throttle == 10);
    CHECK(a->format() == "1-100%10");
    auto b = ArraySpec::parse("1,3,5-9:2");
    REQUIRE(b.ok());
    CHECK(b->indexes.format() == "1,3,5,7,9");
    CHECK(b->throttle == 0);
    auto c = ArraySpec::parse("7,0-2,1");  // duplicates merge
    REQUIRE(c.ok());
    CHECK(c->indexes.format() == "0-2,7");
    CHECK(ArraySpec::parse("0-99999")->indexes.count() == 100000);
}

TEST_CASE("array spec: every bad part is named", "[array]") {
    struct Case {
        const char* text;
        const char* says;
    };
    for (const Case& c : {Case{"", "no indexes"}, Case{"%5", "no indexes"}, Case{"1,,3", "an empty element"},
                          Case{"1,", "an empty element"}, Case{"9-1", "the range '9-1' is reversed"},
                          Case{"1-9:0", "a step of 0 in '1-9:0'"}, Case{"5:2", "a step needs a range"},
                          Case{"1-10%0", "a throttle of 0"}, Case{"a-3", "'a' is not a number"},
                          Case{"1-20000000", "index 20000000 is over the largest allowed, 9999999"},
                          Case{"0-199999", "more than 100000 indexes (job-manager.max-array-size)"},
                          Case{"0-9999999:1", "more than 100000 indexes"}, Case{"5:1", "a step needs a range"}, Case{"1-3%x", "throttle: 'x'"}}) {
        INFO(c.text);
        auto r = ArraySpec::parse(c.text);
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().code == EINVAL);
        CHECK(r.error().message.find(c.says) != std::string::npos);
        CHECK(r.error().message.starts_with(fmt::format("'{}': ", c.text)));
    }
    // A stepped range over the size limit is refused without expanding it.
    CHECK_FALSE(ArraySpec::parse("0-9999999:2").ok());
    CHECK(ArraySpec::parse("0-9999999:100").ok());
    // Interleaved stepped ranges make one set.
    auto woven = ArraySpec::parse("0-99:2,1-99:2");
    REQUIRE(woven.ok());
    CHECK(woven->indexes == IdSet::range(0, 99));
    CHECK(ArraySpec::parse("1-3%200000")->throttle == 200000);  // more than the elements: no limit in effect
}
