#include <catch2/catch.hpp>

#include "core/base64.hpp"
#include "sched/taskmap.hpp"

using namespace banyan;

namespace {

Rv1 r_of(const std::string& r_lite) {
    return Rv1::from_json(nlohmann::json::parse(R"({"version":1,"execution":{"R_lite":)" + r_lite +
                                                R"(,"starttime":0,"expiration":0}})"))
        .value();
}

Jobspec spec_of(const std::string& resources, const std::string& count) {
    return Jobspec::from_json(nlohmann::json::parse(R"({"version":1,"resources":)" + resources +
                                                    R"(,"tasks":[{"command":["a"],"slot":"task","count":)" + count +
                                                    R"(}],"attributes":{"system":{"duration":0}}})"))
        .value();
}

std::string blocks(const TaskMap& m) {
    std::string out;
    for (const auto& b : m.blocks)
        out += fmt::format("{}:{}+{} ", b.rank, b.first_task, b.ntasks);
    return out;
}

const char* kNodeSlot2 = R"([{"type":"node","count":2,"with":[{"type":"slot","count":2,"label":"task","with":[{"type":"core","count":1}]}]}])";

}  // namespace

TEST_CASE("task map: -N2 -n4 gives two tasks a node, in blocks", "[taskmap]") {
    auto m = TaskMap::compute(spec_of(kNodeSlot2, R"({"per_slot":1})"),
                              r_of(R"([{"rank":"3-4","children":{"core":"0-1"}}])"))
                 .value();
    CHECK(blocks(m) == "3:0+2 4:2+2 ");
    CHECK(m.ntasks == 4);
    CHECK(m.find(4)->first_task == 2);
    CHECK(m.find(0) == nullptr);
}

TEST_CASE("task map: -N2 -n3 puts 2 tasks on the first node, 1 on the second", "[taskmap]") {
    auto m = TaskMap::compute(spec_of(kNodeSlot2, R"({"total":3})"),
                              r_of(R"([{"rank":"0-1","children":{"core":"0-1"}}])"))
                 .value();
    CHECK(blocks(m) == "0:0+2 1:2+1 ");
}

TEST_CASE("task map: without -N, slots follow the cores each rank holds", "[taskmap]") {
    const char* slots = R"([{"type":"slot","count":5,"label":"task","with":[{"type":"core","count":2}]}])";
    auto m = TaskMap::compute(spec_of(slots, R"({"per_slot":1})"),
                              r_of(R"([{"rank":"0","children":{"core":"0-5"}},{"rank":"1","children":{"core":"0-3"}}])"))
                 .value();
    CHECK(blocks(m) == "0:0+3 1:3+2 ");
    // An exclusive allocation holding more cores than asked runs only the slots asked for.
    auto big = TaskMap::compute(spec_of(slots, R"({"per_slot":2})"),
                                r_of(R"([{"rank":"0-1","children":{"core":"0-15"}}])"))
                   .value();
    CHECK(blocks(big) == "0:0+10 1:10+0 ");
}

TEST_CASE("task map: per_resource and errors", "[taskmap]") {
    auto per_core = TaskMap::compute(spec_of(kNodeSlot2, R"({"per_resource":{"type":"core","count":1}})"),
                                     r_of(R"([{"rank":"0-1","children":{"core":"0-2"}}])"))
                        .value();
    CHECK(blocks(per_core) == "0:0+3 1:3+3 ");
    auto none = TaskMap::compute(spec_of(R"([{"type":"slot","count":1,"label":"task","with":[{"type":"core","count":4}]}])",
                                         R"({"per_slot":1})"),
                                 r_of(R"([{"rank":"0","children":{"core":"0-1"}}])"));
    REQUIRE_FALSE(none.ok());
    CHECK(none.error().message == "R holds no slot of the jobspec");
}

TEST_CASE("base64 round trips any bytes and refuses bad text", "[base64]") {
    for (std::string bytes : {std::string(), std::string("f"), std::string("fo"), std::string("foo"),
                              std::string("foob"), std::string("\0\xff\x10 binary", 10)}) {
        INFO(bytes.size());
        CHECK(base64_decode(base64_encode(bytes)).value() == bytes);
    }
    CHECK(base64_encode("foobar") == "Zm9vYmFy");
    CHECK(base64_encode("fo") == "Zm8=");
    CHECK_FALSE(base64_decode("Zm8").ok());
    CHECK_FALSE(base64_decode("Zm=8").ok());
    CHECK_FALSE(base64_decode("Zm8*").ok());
}
