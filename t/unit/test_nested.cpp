#include <catch2/catch.hpp>

#include "broker/nested.hpp"
#include "core/pmi_wire.hpp"
#include "resource/rv1.hpp"
#include "sched/shell_options.hpp"
#include "sched/taskmap.hpp"
#include "shell/pmi_simple.hpp"

using namespace banyan;

TEST_CASE("a nested instance's R: the job's, ranks renumbered in order", "[nested]") {
    auto R = nlohmann::json::parse(R"({"version":1,"execution":{"R_lite":[
        {"rank":"3","children":{"core":"0-3"}},{"rank":"7-8","children":{"core":"0-1","gpu":"0"}}],
        "nodelist":["a","b[1-2]"],"starttime":5,"expiration":99,"properties":{"gpu":"7-8","big":"3"}}})");
    auto nested = Rv1::from_json(renumbered_R(R));
    REQUIRE(nested);
    CHECK(nested->rank_set().format() == "0-2");
    CHECK(nested->ranks.at(0).cores.format() == "0-3");
    CHECK(nested->ranks.at(2).gpus.format() == "0");
    CHECK(nested->nodelist.format() == "a,b[1-2]");
    CHECK(nested->expiration == 99);
    CHECK(nested->properties.at("gpu").format() == "1-2");
    CHECK(nested->properties.at("big").format() == "0");
}

TEST_CASE("PMI-1: MPICH's process mapping, one block per run of nodes", "[pmi]") {
    TaskMap map;
    map.blocks = {{0, 0, 2}, {1, 2, 2}, {2, 4, 1}, {3, 5, 0}, {4, 5, 1}};
    map.ntasks = 6;
    CHECK(PmiSimpleServer::process_mapping(map) == "(vector,(0,2,2),(2,2,1))");
    map.blocks = {{0, 0, 4}};
    CHECK(PmiSimpleServer::process_mapping(map) == "(vector,(0,1,4))");
}

TEST_CASE("shell option pmi: pmix, simple, both, off, and anything else named", "[pmi]") {
    auto with = [](const char* value) { return read_shell_options({{"shell", {{"options", {{"pmi", value}}}}}}); };
    CHECK((with("pmix")->pmix && !with("pmix")->pmi_simple));
    CHECK((!with("simple")->pmix && with("simple")->pmi_simple));
    CHECK((with("simple,pmix")->pmix && with("simple,pmix")->pmi_simple));
    CHECK((!with("off")->pmix && !with("off")->pmi_simple));
    auto defaults = read_shell_options(nlohmann::json::object());
    CHECK((defaults->pmix && defaults->pmi_simple));
    CHECK(with("pmi2").error().message ==
          "-o pmi=pmi2: unknown PMI 'pmi2' (expected pmix, simple, both as pmix,simple, or off)");
    CHECK(!with("pmix,"));
}

TEST_CASE("PMI-1 lines: words KEY=VALUE, value and message to the end of the line", "[pmi]") {
    auto put = parse_pmi_line("cmd=put kvsname=k key=a value=b c=d");
    REQUIRE(put);
    CHECK((*put)["value"] == "b c=d");
    CHECK((*put)["key"] == "a");
    auto abort = parse_pmi_line("cmd=abort exitcode=3 message=out of memory");
    REQUIRE(abort);
    CHECK((*abort)["message"] == "out of memory");
    CHECK(!parse_pmi_line("this is not a command"));
    CHECK(!parse_pmi_line("key=a"));  // no cmd
    CHECK(!parse_pmi_line("cmd=put =x"));
}
