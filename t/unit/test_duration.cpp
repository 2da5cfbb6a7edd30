#include <catch2/catch.hpp>

#include <cstdlib>
#include <ctime>
#include <string>

#include "core/duration.hpp"

using namespace banyan;

namespace {

// Local time is read from TZ: the checks must not depend on the machine's
// zone, and the tests after these get the zone back.
struct FixedZone {
    const char* old = std::getenv("TZ");
    std::string saved = old ? old : "";
    FixedZone() {
        setenv("TZ", "UTC", 1);
        tzset();
    }
    ~FixedZone() {
        if (old)
            setenv("TZ", saved.c_str(), 1);
        else
            unsetenv("TZ");
        tzset();
    }
};

}  // namespace

TEST_CASE("moments for --begin-time", "[duration]") {
    FixedZone utc;
    const double now = 1'800'000'000;  // 2027-01-15T08:00:00 UTC
    CHECK(format_moment(now) == "2027-01-15T08:00:00");
    CHECK(*parse_moment("+90", now) == now + 90);
    CHECK(*parse_moment("+2h", now) == now + 7200);
    CHECK(*parse_moment("+1:30", now) == now + 90);
    CHECK(*parse_moment("@1234.5", now) == 1234.5);
    CHECK(*parse_moment("09:30", now) == now + 5400);             // later today
    CHECK(*parse_moment("07:00:10", now) == now + 86400 - 3590);  // passed today: tomorrow
    CHECK(*parse_moment("2027-01-16", now) == now + 16 * 3600);
    CHECK(*parse_moment("2027-01-15 10:00", now) == now + 7200);
    CHECK(*parse_moment("2027-01-15T10:00:30", now) == now + 7230);
    CHECK(*parse_moment("now", now) == now);
    CHECK(format_clock(now + 3600, now) == "09:00");
    CHECK(format_clock(now + 86400 + 3600, now) == "2027-01-16 09:00");
    for (const char* bad : {"", "+", "+-5", "@x", "tomorrow", "25:00", "2027-13-01", "10:00 pm", "+5 m"}) {
        INFO(bad);
        auto r = parse_moment(bad, now);
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().message.find("not a time (expected now, +DURATION, @EPOCH") != std::string::npos);
    }
}
