#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>

#include <unistd.h>

#include "core/config.hpp"

using namespace banyan;

namespace {
const char* kExample = R"(
[bootstrap]
hosts = "node[0-3]"
port = 8050
curve_cert = "/etc/banyan/curve.cert"
connect = ["tcp://%h:%p"]
[tbon]
fanout = 2
torpid_timeout = "30s"
lost_timeout = 5
enabled = true
)";
}

TEST_CASE("config getters return values, fallbacks and typed errors", "[config]") {
    auto c = Config::parse(kExample, "cluster.toml");
    REQUIRE(c.ok());
    CHECK(*c->get_string("bootstrap.hosts") == "node[0-3]");
    CHECK(*c->get_int("bootstrap.port", 1, 65535) == 8050);
    CHECK(*c->get_int("tbon.missing", 0, 10, 4) == 4);
    CHECK(*c->get_bool("tbon.enabled") == true);
    CHECK(*c->get_duration("tbon.torpid_timeout") == 30.0);
    CHECK(*c->get_duration("tbon.lost_timeout") == 5.0);
    CHECK(c->get_string_array("bootstrap.connect")->at(0) == "tcp://%h:%p");
    CHECK(c->has("tbon.fanout"));
    CHECK(!c->has("tbon.nope"));

    auto wrong_type = c->get_int("bootstrap.hosts", 1, 65535);
    REQUIRE(!wrong_type.ok());
    CHECK(wrong_type.error().message == "cluster.toml: bootstrap.hosts: expected an integer in 1-65535, got string");

    auto out_of_range = c->get_int("tbon.fanout", 3, 10);
    REQUIRE(!out_of_range.ok());
    CHECK(out_of_range.error().message == "cluster.toml: tbon.fanout: expected an integer in 3-10, got 2");

    auto missing = c->get_string("bootstrap.bind");
    REQUIRE(!missing.ok());
    CHECK(missing.error().message == "cluster.toml: bootstrap.bind: required key is missing");

    CHECK(!c->get_bool("bootstrap.port").ok());
    CHECK(!c->get_string_array("bootstrap.hosts").ok());
    CHECK(!c->get_duration("bootstrap.connect").ok());
}

TEST_CASE("config reports unknown keys by name", "[config]") {
    auto c = Config::parse("[tbon]\nfanout = 2\nfanuot = 3\n", "x.toml");
    REQUIRE(c.ok());
    auto r = c->check_keys("tbon", {"fanout", "torpid_timeout"});
    REQUIRE(!r.ok());
    CHECK(r.error().message ==
          "x.toml: tbon.fanuot: unknown key, did you mean 'fanout'? (expected one of: fanout, torpid_timeout)");
    auto far = Config::parse("[tbon]\nzzz = 3\n", "x.toml");
    REQUIRE(far.ok());
    CHECK(far->check_keys("tbon", {"fanout"}).error().message ==
          "x.toml: tbon.zzz: unknown key (expected one of: fanout)");
    CHECK(c->check_keys("", {"tbon"}).ok());
    CHECK(c->check_keys("absent", {"x"}).ok());
}

TEST_CASE("config rejects malformed TOML with file, line and column", "[config][malformed]") {
    for (const char* bad : {"[bootstrap\n",
                            "a = \n",
                            "a = 1\na = 2\n",
                            "= 1\n",
                            "a = \"unterminated\n",
                            "[a]\n[a]\n",
                            "a = [1, \"x\"\n",
                            "a = 0x\n",
                            "a = 1979-13-45\n",
                            "a = tru\n",
                            "a.b = 1\na = 2\n",
                            "[[a]]\n[a]\n",
                            "a = {b = 1,}\n",
                            "\xff = 1\n",
                            "a = 'x' 'y'\n",
                            "a = 1_\n",
                            "a = 99999999999999999999\n",
                            "[]\n",
                            "a = \"\\q\"\n",
                            "a = 01\n"}) {
        INFO(bad);
        auto c = Config::parse(bad, "bad.toml");
        REQUIRE(!c.ok());
        CHECK(c.error().message.rfind("bad.toml:", 0) == 0);
    }
}

TEST_CASE("config load names an unreadable file", "[config]") {
    auto c = Config::load("/nonexistent/banyan.toml");
    REQUIRE(!c.ok());
    CHECK(c.error().message.find("/nonexistent/banyan.toml: cannot read") == 0);

    char path[] = "/tmp/banyan-config-XXXXXX";
    close(mkstemp(path));
    std::ofstream(path) << kExample;
    auto ok = Config::load(path);
    std::remove(path);
    REQUIRE(ok.ok());
    CHECK(ok->source() == std::string(path));
}

TEST_CASE("durations accept units and reject garbage", "[config]") {
    CHECK(*parse_duration("250ms") == Approx(0.25));
    CHECK(*parse_duration("30s") == 30);
    CHECK(*parse_duration("5m") == 300);
    CHECK(*parse_duration("2h") == 7200);
    CHECK(*parse_duration("1d") == 86400);
    CHECK(*parse_duration("1.5") == 1.5);
    for (const char* bad : {"", "s", "-1s", "5 m", "5x", "inf", "nan", "1e999"}) {
        INFO(bad);
        CHECK(!parse_duration(bad).ok());
    }
}

TEST_CASE("config values can be set from KEY=VALUE text", "[config]") {
    Config c;
    REQUIRE(c.set_from_text("tbon.fanout=4").ok());
    REQUIRE(c.set_from_text("tbon.torpid_timeout=1s").ok());
    REQUIRE(c.set_from_text("bootstrap.hosts=\"n[0-3]\"").ok());
    REQUIRE(c.set_from_text("broker.flag=true").ok());
    CHECK(*c.get_int("tbon.fanout", 0, 100) == 4);
    CHECK(*c.get_duration("tbon.torpid_timeout") == 1.0);
    CHECK(*c.get_string("bootstrap.hosts") == "n[0-3]");
    CHECK(*c.get_bool("broker.flag"));
    CHECK(!c.set_from_text("novalue").ok());
    CHECK(!c.set_from_text("=3").ok());
    CHECK(!c.set_from_text("a..b=3").ok());
    CHECK(!c.set_from_text("tbon.fanout.x=3").ok());
}
