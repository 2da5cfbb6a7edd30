#include <catch2/catch.hpp>

#include "core/duration.hpp"
#include "core/jobid.hpp"

using namespace banyan;

TEST_CASE("job ids print as f + base58 and read back, also in decimal", "[jobid]") {
    for (JobId id : {JobId{0}, JobId{1}, JobId{57}, JobId{58}, JobId{1000112060220047360ull}, ~JobId{0}}) {
        INFO(id);
        std::string text = format_jobid(id);
        CHECK(text[0] == 'f');
        CHECK(parse_jobid(text).value() == id);
        CHECK(parse_jobid(std::to_string(id)).value() == id);
        CHECK(parse_jobid("\xc6\x92" + text.substr(1)).value() == id);  // Flux's ƒ
    }
    CHECK(format_jobid(58) == "f21");
    CHECK(parse_jobid("f0").error().message == "f0: not a job id ('0' is not a base58 digit)");
    CHECK_FALSE(parse_jobid("fI").ok());  // I and l are not in the alphabet
    CHECK_FALSE(parse_jobid("").ok());
    CHECK_FALSE(parse_jobid("f").ok());
    CHECK_FALSE(parse_jobid("12a").ok());
    CHECK_FALSE(parse_jobid("-3").ok());
    CHECK(parse_jobid("18446744073709551616").error().message.find("too large") != std::string::npos);
    CHECK_FALSE(parse_jobid("fjpXCZedGfVR").ok());  // 2^64 in base58
}

TEST_CASE("a job as users name it: an id, or an array's element ID[INDEX]", "[jobid]") {
    auto plain = parse_job_ref("f2Ubq7dL");
    REQUIRE(plain);
    CHECK(plain->id == parse_jobid("f2Ubq7dL").value());
    CHECK(!plain->index);
    auto element = parse_job_ref("f2Ubq7dL[7]");
    REQUIRE(element);
    CHECK(element->id == plain->id);
    CHECK(element->index == 7u);
    CHECK(format_element(element->id, 7) == "f2Ubq7dL[7]");
    CHECK(parse_job_ref("1234[4294967295]").value().index == 4294967295u);
    for (const char* bad : {"f2Ubq7dL[", "f2Ubq7dL[]", "f2Ubq7dL[x]", "f2Ubq7dL[-1]", "f2Ubq7dL[4294967296]",
                            "[7]", "f2Ubq7dL[7]x", "f2Ubq7dL[7][8]", "f0[1]"}) {
        INFO(bad);
        CHECK(!parse_job_ref(bad));
    }
}

TEST_CASE("job ids are ordered by time and never repeat, across restarts too", "[jobid]") {
    const uint64_t t = 1795300924000;  // ms
    JobIdGenerator gen;
    JobId a = gen.next(t), b = gen.next(t), c = gen.next(t + 1);
    CHECK(a < b);
    CHECK(b < c);
    CHECK(JobIdGenerator::epoch_ms(a) == t);
    CHECK(JobIdGenerator::epoch_ms(c) == t + 1);
    // The clock steps back: ids still grow.
    JobId d = gen.next(t - 5000);
    CHECK(d > c);
    // A restarted generator resumes after the largest id issued, even at
    // an earlier clock.
    JobIdGenerator again(d);
    CHECK(again.next(t - 10000) > d);
    CHECK(again.next(t + 60000) > d);
}

TEST_CASE("durations as users write them", "[duration]") {
    struct Case {
        const char* text;
        double seconds;
    };
    for (auto c : std::vector<Case>{{"30", 1800},   {"10s", 10},      {"5m", 300},     {"2h", 7200},
                                    {"1d", 86400},  {"0.5s", 0.5},    {"1:30", 90},    {"01:00:00", 3600},
                                    {"1.5m", 90},   {"100:00:00", 360000}}) {
        INFO(c.text);
        CHECK(parse_duration(c.text).value() == Approx(c.seconds));
    }
    CHECK(parse_duration("30", BareNumber::seconds).value() == 30);
    for (const char* bad : {"", "s", "5x", "-5", "+5", "1:2:3:4", "1:60", "a:b", "5 m", "inf", "nan", "1e999"}) {
        INFO(bad);
        auto r = parse_duration(bad);
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().message.find("not a duration") != std::string::npos);
    }
    CHECK(format_duration(45) == "45s");
    CHECK(format_duration(750) == "12m30s");
    CHECK(format_duration(11100) == "3h05m");
    CHECK(format_duration(187200) == "2d4h");
}
