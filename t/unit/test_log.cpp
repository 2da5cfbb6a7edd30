#include <catch2/catch.hpp>

#include "core/log.hpp"

using namespace banyan;

TEST_CASE("log lines carry program, rank, component and level", "[log]") {
    log::configure({.program = "broker", .rank = 3, .level = log::Level::info, .ring_size = 3, .to_stderr = false});
    log::info("overlay", "child {} joined", 5);
    auto lines = log::recent();
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].find(" broker[3] overlay.info: child 5 joined") != std::string::npos);
    CHECK(lines[0][4] == '-');  // starts with an ISO 8601 timestamp
    CHECK(lines[0].find('Z') == 23);
}

TEST_CASE("log drops records above the level and keeps a bounded ring", "[log]") {
    log::configure({.program = "t",
                    .rank = std::nullopt,
                    .level = log::Level::warning,
                    .ring_level = log::Level::warning,
                    .ring_size = 2,
                    .to_stderr = false});
    log::debug("c", "hidden");
    log::info("c", "hidden");
    // Earlier tests in this process may have left records: none of these.
    for (const auto& line : log::recent())
        CHECK(line.find("hidden") == std::string::npos);
    log::error("c", "one");
    log::warning("c", "two");
    log::error("c", "three");
    auto lines = log::recent();
    REQUIRE(lines.size() == 2);
    CHECK(lines[0].find("c.warning: two") != std::string::npos);
    CHECK(lines[1].find("c.err: three") != std::string::npos);
}

TEST_CASE("log levels parse by name or number", "[log]") {
    CHECK(*log::parse_level("debug") == log::Level::debug);
    CHECK(*log::parse_level("0") == log::Level::error);
    auto bad = log::parse_level("verbose");
    REQUIRE(!bad.ok());
    CHECK(bad.error().message == "log level 'verbose': expected error, warning, info or debug");
}
