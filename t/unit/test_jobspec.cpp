#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "sched/jobspec.hpp"

using namespace banyan;
namespace fs = std::filesystem;

namespace {

const fs::path kJobspecs = fs::path(BANYAN_CONFORMANCE_DIR) / "jobspec";

std::string read_file(const fs::path& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

// Every file of a conformance folder is accepted (or rejected) under `rules`;
// returns how many files were checked.
size_t check_folder(const std::string& folder, JobspecRules rules, bool valid) {
    size_t n = 0;
    for (const auto& entry : fs::directory_iterator(kJobspecs / folder)) {
        auto spec = Jobspec::parse(read_file(entry.path()), rules);
        INFO(entry.path().filename() << ": " << (spec ? "accepted" : spec.error().message));
        CHECK(spec.ok() == valid);
        if (!valid && !spec.ok())  // one line that names the problem
            CHECK(spec.error().message.find('\n') == std::string::npos);
        n++;
    }
    return n;
}

}  // namespace

TEST_CASE("conformance: flux-core's canonical jobspecs", "[jobspec][conformance]") {
    CHECK(check_folder("valid", JobspecRules::canonical, true) == 26);
    CHECK(check_folder("invalid", JobspecRules::canonical, false) == 55);
}

TEST_CASE("conformance: flux-core's version 1 jobspecs", "[jobspec][conformance]") {
    CHECK(check_folder("valid_v1", JobspecRules::v1, true) == 7);
    CHECK(check_folder("invalid_v1", JobspecRules::v1, false) == 13);
}

TEST_CASE("jobspec errors name the path of the offending key", "[jobspec]") {
    struct Case {
        const char* yaml;
        JobspecRules rules;
        const char* error;
    };
    const std::string head = "version: 1\nresources:\n  - type: slot\n    label: s\n    count: 1\n    with:\n";
    const std::string tail =
        "tasks:\n  - command: [app]\n    slot: s\n    count: {per_slot: 1}\n"
        "attributes: {system: {duration: 60}}\n";
    for (const auto& c : std::vector<Case>{
             {"      - {type: core, count: 0}\n", JobspecRules::canonical,
              "resources[0].with[0].count: must be at least 1"},
             {"      - {type: core, count: 1}\n      - {type: gpu, count: \"x\"}\n", JobspecRules::canonical,
              "resources[0].with[1].count: 'x' is not a count"},
             {"      - {type: core, count: 1}\n      - {type: fpga, count: 1}\n", JobspecRules::v1,
              "resources[0].with[1].type: 'fpga' is not allowed here"},
             {"      - {type: core, count: \"2-4\"}\n", JobspecRules::v1,
              "resources[0].with[0].count: must be an integer, at least 1 (no ranges in version 1)"},
             {"      - {type: core, count: 1}\n      - {type: memory, count: 0, unit: MiB}\n", JobspecRules::v1,
              "resources[0].with[1].count: must be an integer, at least 1"},
             {"      - {type: core, count: 1}\n      - {type: memory, count: 4, unit: 4}\n", JobspecRules::v1,
              "resources[0].with[1].unit: expected a string"},
             {"      - {type: core, count: 1}\n      - {type: memory, count: 4}\n      - {type: memory, count: 4}\n",
              JobspecRules::v1, "resources[0].with[2]: memory appears twice"},
             {"      - {type: memory, count: 4}\n", JobspecRules::v1, "resources[0].with: a slot needs core"},
         }) {
        INFO(c.yaml);
        auto r = Jobspec::parse(head + c.yaml + tail, c.rules);
        REQUIRE(!r.ok());
        CHECK(r.error().message.find(c.error) != std::string::npos);
    }
}

TEST_CASE("jobspec reads counts, tasks, duration; JSON works too", "[jobspec]") {
    auto spec = Jobspec::parse(R"({"version": 9999,
        "resources": [{"type": "node", "count": {"min": 2, "max": 8, "operator": "*", "operand": 2},
                       "with": [{"type": "slot", "label": "s", "count": "1+",
                                 "with": [{"type": "core", "count": 4}, {"type": "memory", "count": "4,9,16", "unit": "GB"}]}]}],
        "tasks": [{"command": ["hostname"], "slot": "s", "count": {"total": 5}}],
        "attributes": {"system": {"duration": 3600.5, "cwd": "/tmp"}}})");
    REQUIRE(spec.ok());
    CHECK(spec->version == 9999);
    const auto& node = spec->resources[0];
    CHECK(node.count.min == 2);
    CHECK(node.count.max == 8u);
    CHECK(node.count.op == '*');
    CHECK(node.with[0].count.max == UINT64_MAX);
    CHECK(node.with[0].with[1].count.values == std::vector<uint64_t>{4, 9, 16});
    CHECK(node.with[0].with[1].unit == "GB");
    CHECK(spec->tasks[0].count_kind == "total");
    CHECK(spec->tasks[0].count == 5);
    CHECK(spec->duration == 3600.5);
}

TEST_CASE("version 1 (Banyan's addition): a slot may hold memory, with its unit", "[jobspec]") {
    auto js = Jobspec::parse(
        "version: 1\nresources:\n  - type: slot\n    label: s\n    count: 2\n    with:\n"
        "      - {type: core, count: 1}\n      - {type: memory, count: 4096, unit: MiB}\n"
        "tasks:\n  - command: [app]\n    slot: s\n    count: {per_slot: 1}\nattributes: {system: {duration: 60}}\n",
        JobspecRules::v1);
    REQUIRE(js.ok());
    const JobspecResource& memory = js->resources[0].with[1];
    CHECK(memory.type == "memory");
    CHECK(memory.count.min == 4096);
    CHECK(memory.unit == "MiB");
}

TEST_CASE("YAML scalars keep their types; quoted ones stay strings", "[jobspec]") {
    auto j = yaml_to_json("a: 1\nb: \"1\"\nc: 1.5\nd: true\ne:\nf: ~\ng: [x, 2]\n");
    REQUIRE(j.ok());
    CHECK((*j)["a"] == 1);
    CHECK((*j)["b"] == "1");
    CHECK((*j)["c"] == 1.5);
    CHECK((*j)["d"] == true);
    CHECK((*j)["e"].is_null());
    CHECK((*j)["f"].is_null());
    CHECK((*j)["g"] == nlohmann::json::array({"x", 2}));
    auto bad = yaml_to_json("foo: bar: baz");
    REQUIRE(!bad.ok());
    CHECK(bad.error().message.find("line 1, column") != std::string::npos);
}

TEST_CASE("a field of the wrong type is an error, never an exception", "[jobspec][malformed]") {
    // Found by fuzz_jobspec: an empty `type:` (null) once threw from json::value().
    for (auto rules : {JobspecRules::canonical, JobspecRules::v1}) {
        auto r =
            Jobspec::parse("version: 1\nresources:\n  - type:\n    label: default\n    with:\n      - type:\n", rules);
        REQUIRE(!r.ok());
        CHECK(r.error().message.find("resources[0]") == 0);
    }
}

TEST_CASE("huge numbers in counts and durations are errors, never exceptions", "[jobspec][malformed]") {
    // Found by fuzz_jobspec: std::stoull threw on a 20-digit count.
    const std::string head = "version: 9999\nresources:\n  - type: node\n    count: ";
    const std::string tail =
        "\ntasks:\n  - command: [app]\n    slot: s\n    count: {per_slot: 1}\n"
        "attributes: {system: {duration: 1e999}}\n";
    for (const char* count :
         {"\"99999999999999999999999+\"", "\"1-99999999999999999999999\"", "\"2-4:99999999999999999999\""}) {
        INFO(count);
        auto r = Jobspec::parse(head + count + tail);
        REQUIRE(!r.ok());
        CHECK(r.error().message.find("resources[0].count") == 0);
    }
    auto r =
        Jobspec::parse(head + "1\n    with: [{type: slot, label: s, count: 1, with: [{type: core, count: 1}]}]" + tail);
    REQUIRE(!r.ok());
    CHECK(r.error().message.find("attributes.system.duration") == 0);
}
