#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "resource/graph.hpp"
#include "resource/grug.hpp"
#include "resource/rv1.hpp"
#include "resource/synthetic.hpp"

using namespace banyan;

namespace {

std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

const std::filesystem::path kConformance = BANYAN_CONFORMANCE_DIR;

}  // namespace

TEST_CASE("R v1 round-trips and groups equal ranks", "[rv1]") {
    auto r = Rv1::parse(R"({"version":1,"execution":{"R_lite":[
        {"rank":"0-1","children":{"core":"0-3","gpu":"0"}},{"rank":"2","children":{"core":"0-7"}}],
        "nodelist":["n[0-2]"],"starttime":10.5,"expiration":99,"properties":{"debug":"1-2"}}})");
    REQUIRE(r.ok());
    CHECK(r->ranks.size() == 3);
    CHECK(r->ranks[1].gpus.format() == "0");
    CHECK(r->ranks[2].cores.format() == "0-7");
    CHECK(r->nodelist[2] == "n2");
    CHECK(r->properties["debug"].format() == "1-2");
    auto again = Rv1::from_json(r->to_json());
    REQUIRE(again.ok());
    CHECK(*again == *r);
    CHECK(r->to_json()["execution"]["R_lite"].size() == 2);
    CHECK(r->to_json()["execution"]["nodelist"][0] == "n[0-2]");
}

TEST_CASE("R v1 errors name the offending key", "[rv1][malformed]") {
    struct Case {
        const char* text;
        const char* error;
    };
    for (auto c : std::vector<Case>{
             {"[]", "expected a JSON object"},
             {"{}", "version: expected 1"},
             {R"({"version":2,"execution":{}})", "version: expected 1"},
             {R"({"version":1})", "execution: expected an object"},
             {R"({"version":1,"execution":{}})", "execution.R_lite: expected an array"},
             {R"({"version":1,"execution":{"R_lite":[{"rank":"x","children":{}}]}})", "R_lite[0].rank: idset 'x'"},
             {R"({"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"3-1"}}]}})",
              "R_lite[0].children.core: idset '3-1': range '3-1' is reversed"},
             {R"({"version":1,"execution":{"R_lite":[{"rank":"0","children":{"fpga":"0"}}]}})",
              "children.fpga: unknown resource type"},
             {R"({"version":1,"execution":{"R_lite":[{"rank":"0","children":{}},{"rank":"0","children":{}}]}})",
              "rank 0 appears twice"},
             {R"({"version":1,"execution":{"R_lite":[{"rank":"0-1","children":{}}],"nodelist":["a"]}})",
              "nodelist has 1 hosts for 2 ranks"},
             {R"({"version":1,"execution":{"R_lite":[],"starttime":"soon"}})", "starttime: expected a number"},
             {R"({"version":1,"execution":{"R_lite":[{"rank":"0-4294967294","children":{}}]}})",
              "more than 1048576 ranks"},
             {R"({"version":1,"execution":{"R_lite":[{"rank":"0","children":{},"memory":-1}]}})",
              "R_lite[0].memory: expected bytes, a whole number above 0"},
             {R"({"version":1,"execution":{"R_lite":[{"rank":"0","children":{},"memory":"4G"}]}})",
              "R_lite[0].memory: expected bytes"},
             {"{not json", "not valid JSON"},
         }) {
        INFO(c.text);
        auto r = Rv1::parse(c.text);
        REQUIRE(!r.ok());
        CHECK(r.error().message.find(c.error) != std::string::npos);
    }
}

TEST_CASE("node descriptions round-trip and reject bad fields", "[node]") {
    NodeDescription n{.rank = 3, .hostname = "node3", .sockets = {{IdSet::range(0, 3), IdSet{0}, 1u << 30}}};
    auto again = NodeDescription::from_json(n.to_json());
    REQUIRE(again.ok());
    CHECK(*again == n);
    for (const char* bad :
         {R"({})", R"({"rank":-1,"hostname":"a","sockets":[]})", R"({"rank":0,"hostname":"","sockets":[]})",
          R"({"rank":0,"hostname":"a"})", R"({"rank":0,"hostname":"a","sockets":[{"cores":"x","gpus":"","memory":0}]})",
          R"({"rank":0,"hostname":"a","sockets":[{"cores":"0","gpus":"","memory":-5}]})"}) {
        INFO(bad);
        CHECK(!NodeDescription::from_json(nlohmann::json::parse(bad)).ok());
    }
}

TEST_CASE("synthetic clusters: counts per socket, hosts in order", "[synthetic]") {
    auto nodes = parse_synthetic_cluster("node[0-3]: socket:2,core:32,gpu:4,memory:256G");
    REQUIRE(nodes.ok());
    REQUIRE(nodes->size() == 4);
    CHECK((*nodes)[3].hostname == "node3");
    CHECK((*nodes)[3].rank == 3);
    CHECK((*nodes)[0].cores().count() == 64);
    CHECK((*nodes)[0].gpus().format() == "0-7");
    CHECK((*nodes)[0].memory() == 512ull << 30);
    for (const char* bad : {"node[0-3]", "node[0-: core:1", "n1: core:0", "n1: core:x", "n1: fpga:2",
                            "n1: core:1,memory:12Q", "n1: socket:0,core:1", ": core:1"}) {
        INFO(bad);
        auto r = parse_synthetic_cluster(bad);
        REQUIRE(!r.ok());
        CHECK(r.error().message.find("synthetic '") == 0);
    }
}

TEST_CASE("graph from nodes: vertices, names, R", "[graph]") {
    auto nodes = parse_synthetic_cluster("node[0-1]: socket:2,core:4,gpu:1,memory:2G");
    auto g = ResourceGraph::from_nodes(*nodes);
    REQUIRE(g.ok());
    // cluster + per node (node + 2 x (socket + 4 cores + 1 gpu + 1 memory)) = 1 + 2 * 15
    CHECK(g->size() == 31);
    auto node1 = g->node_of_rank(1);
    REQUIRE(node1);
    CHECK(g->name(*node1) == "node1");
    CHECK(g->path(g->children(g->children(*node1)[1])[0]) == "/cluster0/node1/socket1/core4");
    Rv1 r = g->to_rv1({VertexStatus::up});
    CHECK(r.to_json()["execution"]["R_lite"][0] ==
          nlohmann::json({{"rank", "0-1"}, {"children", {{"core", "0-7"}, {"gpu", "0-1"}}}}));
    (*g)[*node1].status = VertexStatus::drained;
    CHECK(g->to_rv1({VertexStatus::up}).rank_set().format() == "0");
    CHECK(!g->add_node((*nodes)[0]).ok());
}

TEST_CASE("JGF round-trips a graph", "[graph][jgf]") {
    auto g = ResourceGraph::from_nodes(*parse_synthetic_cluster("n[5-6]: socket:1,core:2,gpu:1"));
    auto again = ResourceGraph::from_jgf(g->to_jgf());
    REQUIRE(again.ok());
    CHECK(again->size() == g->size());
    CHECK(again->edge_count() == g->edge_count());
    CHECK(again->to_jgf() == g->to_jgf());
    CHECK(again->name(*again->node_of_rank(1)) == "n6");
    for (const char* bad :
         {"[]", R"({"graph":{}})", R"({"graph":{"nodes":[{"id":"0"}]}})",
          R"({"graph":{"nodes":[{"id":"0","metadata":{"type":"a","id":"x"}}]}})",
          R"({"graph":{"nodes":[{"id":"0","metadata":{"type":"a"}},{"id":"0","metadata":{"type":"a"}}]}})",
          R"({"graph":{"nodes":[{"id":"0","metadata":{"type":"a"}}],"edges":[{"source":"0","target":"9"}]}})"}) {
        INFO(bad);
        CHECK(!ResourceGraph::from_jgf(nlohmann::json::parse(bad)).ok());
    }
    // A metadata field of the wrong type, or out of range, is named.
    for (auto [metadata, message] : std::initializer_list<std::pair<const char*, const char*>>{
             {R"("rank":"x")", "JGF: graph.nodes[0].metadata.rank: expected an integer"},
             {R"("rank":4294967296)", "JGF: graph.nodes[0].metadata.rank: expected an integer"},
             {R"("name":7)", "JGF: graph.nodes[0].metadata.name: expected a string"},
             {R"("unit":[])", "JGF: graph.nodes[0].metadata.unit: expected a string"},
             {R"("paths":{"containment":1})", "JGF: graph.nodes[0].metadata.paths.containment: expected a string"}}) {
        auto text = fmt::format(R"({{"graph":{{"nodes":[{{"id":"0","metadata":{{"type":"a",{}}}}}]}}}})", metadata);
        auto r = ResourceGraph::from_jgf(nlohmann::json::parse(text));
        INFO(text);
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().message == message);
    }
}

TEST_CASE("every conformance GRUG and JGF loads", "[graph][conformance]") {
    REQUIRE(std::filesystem::exists(kConformance));
    size_t loaded = 0;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(kConformance / "fluxion")) {
        auto ext = entry.path().extension();
        if (ext != ".graphml" && !(ext == ".json" && entry.path().string().find("/jgfs/") != std::string::npos))
            continue;
        INFO(entry.path());
        std::string text = read_file(entry.path());
        auto g = ext == ".graphml" ? read_grug(text) : ResourceGraph::from_jgf(nlohmann::json::parse(text));
        CHECK(g.ok());
        if (g.ok())
            loaded++;
    }
    CHECK(loaded == 33);
}

TEST_CASE("GRUG generation matches Fluxion's ids and sizes", "[graph][grug]") {
    auto tiny = read_grug(read_file(kConformance / "fluxion/grugs/tiny.graphml"));
    REQUIRE(tiny.ok());
    CHECK(tiny->size() == 100);
    auto jgf = ResourceGraph::from_jgf(nlohmann::json::parse(read_file(kConformance / "fluxion/jgfs/tiny.json")));
    REQUIRE(jgf.ok());
    // The same graph as Fluxion's own export: the same vertex paths (ids,
    // names, nesting), though Fluxion numbers them in another order.
    auto paths = [](const ResourceGraph& g) {
        std::vector<std::string> out;
        for (ResourceGraph::Vertex v = 0; v < g.size(); v++)
            out.push_back(g.path(v) + " size=" + std::to_string(g[v].size) + std::string(g.unit(v)));
        std::sort(out.begin(), out.end());
        return out;
    };
    CHECK(paths(*tiny) == paths(*jgf));
    auto sierra = read_grug(read_file(kConformance / "fluxion/grugs/sierra.graphml"));
    REQUIRE(sierra.ok());
    CHECK(sierra->size() == 350473);
    CHECK(sierra->nodes().size() == 4320);
    CHECK(!read_grug("<graphml><graph/></graphml>").ok());
    CHECK(!read_grug("not xml").ok());
}
