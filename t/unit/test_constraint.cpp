#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "resource/graph.hpp"
#include "sched/constraint.hpp"
#include "sched/matcher.hpp"

using namespace banyan;
using json = nlohmann::json;

namespace {

// A known policy's (the name is this file's, and right).
std::unique_ptr<MatchPolicy> policy_named(const std::string& name) {
    auto policy = MatchPolicy::create(name);
    return std::move(*policy);
}

Constraint must(const json& j) {
    auto c = Constraint::from_json(j);
    INFO(j.dump() << ": " << (c ? "" : c.error().message));
    REQUIRE(c.ok());
    return *c;
}

// A node with these properties, named node<rank>.
bool on(const Constraint& c, int64_t rank, std::vector<std::string> props) {
    return c.match(fmt::format("node{}", rank), rank,
                   [&](std::string_view name) { return std::find(props.begin(), props.end(), name) != props.end(); });
}

std::string query(std::string_view text) {
    auto j = Constraint::parse_query(text);
    INFO(text << ": " << (j ? "" : j.error().message));
    REQUIRE(j.ok());
    return j->dump();
}

std::string query_error(std::string_view text) {
    auto j = Constraint::parse_query(text);
    REQUIRE_FALSE(j.ok());
    return j.error().message;
}

}  // namespace

TEST_CASE("constraint: every RFC 31 operator", "[constraint]") {
    Constraint props = must({{"properties", {"gpu", "^bigmem"}}});
    CHECK(on(props, 0, {"gpu"}));
    CHECK_FALSE(on(props, 0, {"gpu", "bigmem"}));
    CHECK_FALSE(on(props, 0, {}));
    Constraint hosts = must({{"hostlist", {"node[0-3]", "node7"}}});
    CHECK(on(hosts, 2, {}));
    CHECK(on(hosts, 7, {}));
    CHECK_FALSE(on(hosts, 5, {}));
    Constraint ranks = must({{"ranks", {"1-2", "9"}}});
    CHECK(on(ranks, 9, {}));
    CHECK_FALSE(on(ranks, 0, {}));
    Constraint both = must({{"and", {{{"properties", {"gpu"}}}, {{"ranks", {"0-3"}}}}}});
    CHECK(on(both, 3, {"gpu"}));
    CHECK_FALSE(on(both, 4, {"gpu"}));
    Constraint either = must({{"or", {{{"properties", {"gpu"}}}, {{"ranks", {"0"}}}}}});
    CHECK(on(either, 0, {}));
    CHECK(on(either, 5, {"gpu"}));
    CHECK_FALSE(on(either, 5, {}));
    Constraint neither = must({{"not", {{{"properties", {"gpu"}}}}}});
    CHECK(on(neither, 0, {}));
    CHECK_FALSE(on(neither, 0, {"gpu"}));
    // Empty and: true; empty or: false.
    CHECK(on(must({{"and", json::array()}}), 0, {}));
    CHECK_FALSE(on(must({{"or", json::array()}}), 0, {}));
    // Round trip.
    CHECK(must(both.to_json()).to_json() == both.to_json());
}

TEST_CASE("constraint: bad JSON is named by its path", "[constraint]") {
    auto error = [](const json& j) {
        auto c = Constraint::from_json(j);
        REQUIRE_FALSE(c.ok());
        return c.error().message;
    };
    CHECK(error({{"prop", {"x"}}}) ==
          "constraints: unknown operator 'prop' (known: properties, hostlist, ranks, and, or, not)");
    CHECK(error({{"properties", "gpu"}}) == "constraints.properties: expected an array");
    CHECK(error({{"and", {{{"properties", {1}}}}}}) == "constraints.and[0].properties[0]: expected a string");
    CHECK(error({{"hostlist", {"node[1-"}}}).rfind("constraints.hostlist[0]: ", 0) == 0);
    CHECK(error({{"ranks", {"3-1"}}}).rfind("constraints.ranks[0]: ", 0) == 0);
    CHECK(error({{"properties", {"a b"}}}) ==
          "constraints.properties[0]: property 'a b': ' ' is not allowed in a name");
    CHECK(error({{"properties", {"^"}}}) == "constraints.properties[0]: a property name is empty");
    // A name a query could not write back (found by fuzz_constraint: `--x`
    // read as not(-x), described as `not -x`, read back as not(not x)).
    CHECK(error({{"properties", {"-x"}}}) ==
          "constraints.properties[0]: property '-x': a name cannot start with - (- negates)");
    CHECK(error({{"properties", {std::string("a\x01b")}}}) ==
          "constraints.properties[0]: a property name cannot hold a control character");
    CHECK_FALSE(Constraint::parse_query("--x").ok());
    CHECK(error(json::array()).rfind("constraints: expected an object with one operator", 0) == 0);
    CHECK(error({{"properties", {"a"}}, {"ranks", {"0"}}}).rfind("constraints: expected an object", 0) == 0);
    // What one constraint may make rank 0 hold is bounded, over the whole tree.
    CHECK(error({{"and", {{{"hostlist", {"a[0-40000]"}}}, {{"hostlist", {"b[0-40000]"}}}}}}) ==
          "constraints.and[1].hostlist[0]: a constraint may name at most 65536 hosts");
}

TEST_CASE("constraint: query text", "[constraint]") {
    CHECK(query("gpu") == R"({"properties":["gpu"]})");
    CHECK(query("gpu,^bigmem") == R"({"properties":["gpu","^bigmem"]})");
    CHECK(query("host:node[0-3]") == R"({"hostlist":["node[0-3]"]})");
    CHECK(query("rank:0-3") == R"({"ranks":["0-3"]})");
    CHECK(query("gpu rank:0-3") == R"({"and":[{"properties":["gpu"]},{"ranks":["0-3"]}]})");
    CHECK(query("gpu and -rank:0") == R"({"and":[{"properties":["gpu"]},{"not":[{"ranks":["0"]}]}]})");
    CHECK(query("gpu or bigmem and arch=x86_64") ==
          R"({"or":[{"properties":["gpu"]},{"and":[{"properties":["bigmem"]},{"properties":["arch=x86_64"]}]}]})");
    CHECK(query("(gpu || bigmem) && not hosts:n[1-2]") ==
          R"({"and":[{"or":[{"properties":["gpu"]},{"properties":["bigmem"]}]},{"not":[{"hostlist":["n[1-2]"]}]}]})");
    CHECK(query_error("") == "an empty constraint");
    CHECK(query_error("(gpu") == "a '(' is not closed");
    CHECK(query_error("gpu and") == "the constraint ends where a term was expected");
    CHECK(query_error("or gpu") == "'or': expected a term");
    CHECK(query_error("gpu )") == "')': expected and, or or the end");
    CHECK(query_error("zone:a") == "'zone:a': unknown operator 'zone' (known: property, host, hosts, rank, ranks)");
    CHECK(query_error("rank:x").rfind("'rank:x': ", 0) == 0);
    CHECK(query_error("host:").rfind("'host:': no value", 0) == 0);
    CHECK(query_error("gpu,,x") == "'gpu,,x': a property name is empty");
}

TEST_CASE("constraint: the term no node meets is named", "[constraint]") {
    // Nodes: rank 0 has gpu, rank 1 has bigmem.
    std::vector<std::vector<std::string>> nodes{{"gpu"}, {"bigmem"}};
    auto satisfiable = [&](const Constraint& c) {
        for (size_t r = 0; r < nodes.size(); ++r)
            if (on(c, static_cast<int64_t>(r), nodes[r]))
                return true;
        return false;
    };
    auto unmet = [&](std::string_view text) {
        auto j = Constraint::parse_query(text);
        REQUIRE(j.ok());
        return must(*j).unmet_term(satisfiable).value_or("(met)");
    };
    CHECK(unmet("gpu") == "(met)");
    CHECK(unmet("gpu,h100") == "h100");
    CHECK(unmet("gpu and rank:5") == "rank:5");
    CHECK(unmet("gpu and bigmem") == "gpu and bigmem");
    CHECK(unmet("gpu,bigmem") == "gpu,bigmem");
    CHECK(unmet("h100 or a100") == "h100 or a100");
}

TEST_CASE("constraint: the matcher honours it in every policy", "[constraint][matcher]") {
    std::vector<NodeDescription> nodes;
    for (uint32_t r = 0; r < 4; ++r)
        nodes.push_back({r, fmt::format("node{}", r), {{IdSet::range(0, 3), {}, 0}}, {}});
    nodes[1].properties = {"gpu-a100"};
    nodes[2].properties = {"gpu-a100", "bigmem"};
    auto graph = ResourceGraph::from_nodes(nodes);
    REQUIRE(graph.ok());
    auto job = [](const std::string& constraint) {
        json doc = {
            {"version", 1},
            {"resources",
             {{{"type", "node"},
               {"count", 1},
               {"with",
                {{{"type", "slot"}, {"count", 1}, {"label", "task"}, {"with", {{{"type", "core"}, {"count", 1}}}}}}}}}},
            {"tasks", {{{"command", {"app"}}, {"slot", "task"}, {"count", {{"per_slot", 1}}}}}},
            {"attributes", {{"system", {{"duration", 60}, {"constraints", json::parse(constraint)}}}}}};
        auto js = Jobspec::from_json(doc);
        INFO(constraint << ": " << (js ? "" : js.error().message));
        REQUIRE(js.ok());
        return *js;
    };
    for (const auto& policy : MatchPolicy::names()) {
        INFO(policy);
        Matcher m(*graph, policy_named(policy));
        auto rank_of = [&](const MatchResult& r) { return m.to_rv1(r.claims, 0, 0).ranks.begin()->first; };
        auto a100 = m.match(job(R"({"properties": ["gpu-a100"]})"), MatchOp::allocate, 0, 1);
        REQUIRE(a100.ok());
        REQUIRE(a100->matched);
        CHECK((rank_of(*a100) == 1 || rank_of(*a100) == 2));
        REQUIRE(m.cancel(1).ok());  // node-exclusive policies hold the node whole
        auto plain = m.match(job(R"({"properties": ["gpu-a100", "^bigmem"]})"), MatchOp::allocate, 0, 2);
        REQUIRE(plain->matched);
        CHECK(rank_of(*plain) == 1);
        auto host = m.match(job(R"({"hostlist": ["node3"]})"), MatchOp::allocate, 0, 3);
        REQUIRE(host->matched);
        CHECK(rank_of(*host) == 3);
        auto rank = m.match(job(R"({"not": [{"ranks": ["1-3"]}]})"), MatchOp::allocate, 0, 4);
        REQUIRE(rank->matched);
        CHECK(rank_of(*rank) == 0);
    }
    Matcher m(*graph, policy_named("pack"));
    auto never = m.could_ever_fit(job(R"({"properties": ["gpu-h100"]})"));
    REQUIRE_FALSE(never.ok());
    CHECK(never.error().code == ENOSPC);
    CHECK(never.error().message == "unsatisfiable: no node has the property 'gpu-h100'");
    auto unmet = m.could_ever_fit(job(R"({"and": [{"properties": ["bigmem"]}, {"ranks": ["3"]}]})"));
    REQUIRE_FALSE(unmet.ok());
    CHECK(unmet.error().message == "unsatisfiable: no node satisfies 'bigmem and rank:3'");
    auto too_big = m.could_ever_fit(*Jobspec::from_json(json::parse(R"({"version": 1,
        "resources": [{"type": "node", "count": 2, "with": [{"type": "slot", "count": 1, "label": "t",
                       "with": [{"type": "core", "count": 1}]}]}],
        "tasks": [{"command": ["app"], "slot": "t", "count": {"per_slot": 1}}],
        "attributes": {"system": {"duration": 60, "constraints": {"properties": ["bigmem"]}}}})")));
    REQUIRE_FALSE(too_big.ok());
    CHECK(too_big.error().message == "unsatisfiable: the 1 node that satisfy 'bigmem' can never hold this request");
    // A bad constraint is a bad jobspec, named by its path.
    auto doc = json::parse(R"({"version": 1, "resources": [{"type": "slot", "count": 1, "label": "t",
        "with": [{"type": "core", "count": 1}]}], "tasks": [{"command": ["app"], "slot": "t",
        "count": {"per_slot": 1}}], "attributes": {"system": {"duration": 1,
        "constraints": {"properties": [true]}}}})");
    auto refused = Jobspec::from_json(doc);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().message == "attributes.system.constraints.properties[0]: expected a string");
}

TEST_CASE("constraint: properties travel in JGF and R", "[constraint]") {
    NodeDescription n{0, "node0", {{IdSet::range(0, 1), {}, 0}}, {"arch=x86_64", "bigmem"}};
    auto graph = ResourceGraph::from_nodes({n});
    REQUIRE(graph.ok());
    auto back = ResourceGraph::from_jgf(graph->to_jgf());
    REQUIRE(back.ok());
    auto node = back->node_of_rank(0);
    REQUIRE(node);
    CHECK(back->properties(*node) == std::vector<std::string>{"arch=x86_64", "bigmem"});
    Rv1 r = graph->to_rv1({VertexStatus::up});
    CHECK(r.properties.at("bigmem").format() == "0");
    auto d = NodeDescription::from_json(n.to_json());
    REQUIRE(d.ok());
    CHECK(d->properties == n.properties);
    json bad = n.to_json();
    bad["properties"] = {"a b"};
    CHECK(NodeDescription::from_json(bad).error().message ==
          "node description: properties[0]: property 'a b': ' ' is not allowed in a name");
}

TEST_CASE("profile: network packs slots onto the fewest nodes, cpu and memory spread them", "[matcher]") {
    std::vector<NodeDescription> nodes;
    for (uint32_t r = 0; r < 4; ++r)
        nodes.push_back({r, fmt::format("node{}", r), {{IdSet::range(0, 3), {}, 0}}, {}});
    auto graph = ResourceGraph::from_nodes(nodes);
    REQUIRE(graph.ok());
    auto job = [](const char* profile, int slots) {
        json doc = {
            {"version", 1},
            {"resources",
             {{{"type", "slot"}, {"count", slots}, {"label", "task"}, {"with", {{{"type", "core"}, {"count", 1}}}}}}},
            {"tasks", {{{"command", {"app"}}, {"slot", "task"}, {"count", {{"per_slot", 1}}}}}},
            {"attributes", {{"system", {{"duration", 60}}}}}};
        if (*profile)
            doc["attributes"]["system"]["shell"] = {{"options", {{"profile", profile}}}};
        auto js = Jobspec::from_json(doc);
        REQUIRE(js.ok());
        return *js;
    };
    auto ranks = [](Matcher& m, const Jobspec& js, uint64_t id) {
        auto r = m.match(js, MatchOp::allocate, 0, id);
        REQUIRE(r.ok());
        REQUIRE(r->matched);
        return m.to_rv1(r->claims, 0, 0).rank_set().format();
    };
    for (const auto& policy : MatchPolicy::names()) {
        INFO(policy);
        Matcher m(*graph, policy_named(policy));
        CHECK(ranks(m, job("cpu", 4), 1) == "0-3");
        REQUIRE(m.cancel(1).ok());                         // node-exclusive policies hold the nodes whole
        CHECK(ranks(m, job("memory", 2), 2).size() == 3);  // two nodes, e.g. "0-1" or "0,2"
        REQUIRE(m.cancel(2).ok());
        auto packed = ranks(m, job("network", 3), 3);  // 3 slots fit on one node
        CHECK(packed.find_first_of(",-") == std::string::npos);
    }
    json doc = {{"version", 1},
                {"resources",
                 {{{"type", "slot"}, {"count", 1}, {"label", "task"}, {"with", {{{"type", "core"}, {"count", 1}}}}}}},
                {"tasks", {{{"command", {"app"}}, {"slot", "task"}, {"count", {{"per_slot", 1}}}}}},
                {"attributes", {{"system", {{"duration", 60}, {"shell", {{"options", {{"profile", "io"}}}}}}}}}};
    auto refused = Jobspec::from_json(doc);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().message == "attributes.system.shell.options.profile: expected network, cpu or memory");
}

TEST_CASE("constraint: a description reads back as the same constraint, whatever the names", "[constraint]") {
    // Names a bare word would misread: keywords, a leading '!', a ':'
    // (found by fuzz_constraint).
    for (const char* query : {"property:and", "property:!x", "property:a:b,c", "not property:or", "gpu or ^big",
                              "(a and b) or not (c and host:n[1-3])"}) {
        INFO(query);
        auto json = Constraint::parse_query(query);
        REQUIRE(json.ok());
        auto c = Constraint::from_json(*json);
        REQUIRE(c.ok());
        auto again = Constraint::parse_query(c->describe());
        REQUIRE(again.ok());
        CHECK(*again == *json);
    }
}
