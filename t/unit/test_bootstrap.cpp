#include <catch2/catch.hpp>

#include <fstream>

#include <unistd.h>

#include "broker/bootstrap.hpp"

using namespace banyan;

namespace {

std::string write_config(const std::string& text) {
    std::string path = "/tmp/banyan-unit-" + std::to_string(getpid()) + ".toml";
    std::ofstream(path) << text;
    return path;
}

}  // namespace

TEST_CASE("bootstrap takes the rank from the host name and fills templates", "[bootstrap]") {
    std::string path = write_config(
        "[bootstrap]\nhosts = \"node[0-6]\"\nport = 9000\n"
        "bind = \"ipc:///tmp/t-%r\"\nconnect = \"ipc:///tmp/t-%r\"\n[tbon]\nfanout = 2\n");
    auto b = make_bootstrap({.config_path = path, .hostname = "node1"});
    REQUIRE(b.ok());
    CHECK(b->rank == 1);
    CHECK(b->size == 7);
    CHECK(b->parent() == 0u);
    CHECK(b->children() == std::vector<uint32_t>{3, 4});
    CHECK(b->bind_uri == "ipc:///tmp/t-1");
    CHECK(b->parent_uri == "ipc:///tmp/t-0");
    CHECK(b->quorum == 7);
    CHECK(b->torpid_timeout == 30);

    auto leaf = make_bootstrap({.config_path = path, .rank = 6, .hostname = "elsewhere"});
    REQUIRE(leaf.ok());
    CHECK(leaf->bind_uri.empty());  // no children: nothing to bind
    CHECK(leaf->parent_uri == "ipc:///tmp/t-2");
    unlink(path.c_str());
}

TEST_CASE("bootstrap settings override the file", "[bootstrap]") {
    auto b = make_bootstrap({.settings = {"bootstrap.size=4", "bootstrap.bind=ipc:///x/%r", "tbon.fanout=0",
                                          "tbon.torpid_timeout=1.5s", "broker.quorum=2"},
                             .rank = 0,
                             .hostname = "h"});
    REQUIRE(b.ok());
    CHECK(b->size == 4);
    CHECK(b->children() == std::vector<uint32_t>{1, 2, 3});
    CHECK(b->torpid_timeout == 1.5);
    CHECK(b->quorum == 2);
}

TEST_CASE("bootstrap errors name what is wrong", "[bootstrap][malformed]") {
    struct Case {
        std::vector<std::string> settings;
        std::optional<uint32_t> rank;
        std::string error;
    };
    for (const auto& c : std::vector<Case>{
             {{"bootstrap.size=2"}, 5, "rank 5 is out of range: the instance has 2 ranks"},
             {{"bootstrap.hosts=\"n[0-1]\""}, std::nullopt, "host 'h' is not in bootstrap.hosts (n[0-1])"},
             {{"bootstrap.hosts=\"n[\""}, 0, "bootstrap.hosts: hostlist 'n['"},
             {{"bootstrap.size=2"}, 0, "bootstrap.curve_cert is required for tcp://"},
             {{"tbon.fanout=-1"}, 0, "tbon.fanout: expected an integer in 0-65536, got -1"},
             {{"tbon.torpid_timeout=0"}, 0, "tbon.torpid_timeout: must be more than 0"},
             {{"tbon.lost_timeout=\"soon\""}, 0, "tbon.lost_timeout: 'soon' is not a duration"},
             {{"broker.quorum=9"}, 0, "broker.quorum: expected an integer in 1-1"},
             {{"tbon.fanuot=2"}, 0, "tbon.fanuot: unknown key, did you mean 'fanout'?"},
             {{"foo=1"}, 0, "foo: unknown table (expected one of: queues, bootstrap"},
             {{"partitions.debug.nodes=\"n1\""}, 0, "partitions: unknown table"},
             {{"qos.high.priority=1"}, 0, "qos: unknown table"},
             {{"accounting.storage=\"x\""}, 0, "accounting.storage: unknown key"},
             {{"shed.queue-policy=\"easy\""}, 0, "shed: unknown table, did you mean 'sched'?"},
             {{"bootstrap.curve_cert=\"/nonexistent.cert\""}, 0, "/nonexistent.cert: No such file"},
             {{"novalue"}, 0, "--setattr 'novalue': expected KEY=VALUE"},
         }) {
        INFO(c.error);
        auto b = make_bootstrap({.settings = c.settings, .rank = c.rank, .hostname = "h"});
        REQUIRE(!b.ok());
        CHECK(b.error().message.find(c.error) != std::string::npos);
    }
}

TEST_CASE("an empty config file, or one without hosts, is refused rather than run alone", "[bootstrap][malformed]") {
    for (const auto& [text, error] : std::vector<std::pair<std::string, std::string>>{
             {"", ": the config file is empty (expected [bootstrap] hosts)"},
             {"# only a comment\n", ": the config file is empty"},
             {"[tbon]\nfanout = 2\n", ": bootstrap.hosts is missing"},
         }) {
        INFO(text);
        std::string path = write_config(text);
        auto b = make_bootstrap({.config_path = path, .rank = 0, .hostname = "h"});
        REQUIRE(!b.ok());
        CHECK(b.error().message.rfind(path + error, 0) == 0);
        unlink(path.c_str());
    }
}
