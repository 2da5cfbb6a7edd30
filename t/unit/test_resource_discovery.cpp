#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "resource/cgroup.hpp"
#include "resource/discovery.hpp"
#include "resource/machine_topology.hpp"
#include "sched/constraint.hpp"

using namespace banyan;
namespace fs = std::filesystem;

namespace {

// A scratch cgroup file system: write(PATH, TEXT) under a fresh root.
struct CgroupFixture {
    fs::path root = fs::temp_directory_path() / ("banyan-cgroup-" + std::to_string(getpid()));
    CgroupFixture() { fs::remove_all(root); }
    ~CgroupFixture() { fs::remove_all(root); }
    void write(const std::string& path, const std::string& text) {
        fs::create_directories((root / path).parent_path());
        std::ofstream(root / path) << text << "\n";
    }
};

}  // namespace

TEST_CASE("cgroup v2: cpu.max and memory.max, smallest over ancestors", "[cgroup]") {
    CgroupFixture fx;
    fx.write("kubepods/pod1/cpu.max", "max 100000");
    fx.write("kubepods/pod1/ctr/cpu.max", "450000 100000");  // 4.5 CPUs: 4 cores
    fx.write("kubepods/memory.max", "8589934592");
    fx.write("kubepods/pod1/ctr/memory.max", "max");
    auto limits = read_cgroup_limits("0::/kubepods/pod1/ctr\n", fx.root);
    CHECK(limits.version == "v2");
    CHECK(limits.max_cores == 4u);
    CHECK(limits.max_memory == 8589934592u);
}

TEST_CASE("cgroup v2: half a CPU still advertises one core; no files, no limit", "[cgroup]") {
    CgroupFixture fx;
    fx.write("small/cpu.max", "50000 100000");
    CHECK(read_cgroup_limits("0::/small\n", fx.root).max_cores == 1u);
    auto none = read_cgroup_limits("0::/absent\n", fx.root);
    CHECK(!none.max_cores);
    CHECK(!none.max_memory);
    CHECK(read_cgroup_limits("", fx.root).version == "none");
}

TEST_CASE("cgroup v1 fallback, also on hybrid hosts", "[cgroup]") {
    CgroupFixture fx;
    fx.write("cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "200000");
    fx.write("cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000");
    fx.write("memory/docker/abc/memory.limit_in_bytes", "1073741824");
    fx.write("memory/memory.limit_in_bytes", "9223372036854771712");  // unlimited
    auto limits = read_cgroup_limits("4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n", fx.root);
    CHECK(limits.version == "v1");
    CHECK(limits.max_cores == 2u);
    CHECK(limits.max_memory == 1073741824u);
    fx.write("cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1");
    CHECK(!read_cgroup_limits("3:cpu,cpuacct:/docker/abc\n", fx.root).max_cores);
}

TEST_CASE("limits keep the lowest cores and cut memory from the last socket", "[discovery]") {
    NodeDescription n{
        .rank = 0, .hostname = "h", .sockets = {{IdSet::range(0, 7), {}, 8}, {IdSet::range(8, 15), {}, 8}}};
    apply_limits(n, CgroupLimits{.max_cores = 10u, .max_memory = 12u});
    CHECK(n.sockets[0].cores.format() == "0-7");
    CHECK(n.sockets[1].cores.format() == "8-9");
    CHECK(n.sockets[0].memory == 8);
    CHECK(n.sockets[1].memory == 4);
}

TEST_CASE("discovery reads sockets, cores and memory from a synthetic topology", "[discovery]") {
    auto n = discover_node(2, "sim2", {.synthetic = "pack:2 [numa(memory=2147483648)] core:4 pu:2"});
    REQUIRE(n.ok());
    REQUIRE(n->sockets.size() == 2);
    CHECK(n->sockets[0].cores.format() == "0-3");
    CHECK(n->sockets[1].cores.format() == "4-7");
    CHECK(n->memory() == 4294967296u);
    CHECK(n->gpus().empty());
    CHECK(n->rank == 2);
    // Limits are for this machine only: a synthetic node keeps all it has.
    auto limited =
        discover_node(0, "sim", {.synthetic = "pack:1 core:8 pu:1", .limits = CgroupLimits{.max_cores = 2u}});
    CHECK(limited->cores().count() == 8);
}

TEST_CASE("discovery finds GPUs by CUDA device or 3D class, not a plain VGA chip", "[discovery]") {
    auto n = discover_node(
        0, "gpu0", {.xml_path = (std::filesystem::path(BANYAN_TEST_DATA_DIR) / "hwloc" / "two-gpu-node.xml").string()});
    REQUIRE(n.ok());
    REQUIRE(n->sockets.size() == 2);
    CHECK(n->sockets[0].gpus.format() == "0");
    CHECK(n->sockets[1].gpus.format() == "1");
    CHECK(n->cores().count() == 4);
}

TEST_CASE("discovery names the node's features as properties", "[discovery]") {
    auto n = discover_node(
        0, "gpu0", {.xml_path = (std::filesystem::path(BANYAN_TEST_DATA_DIR) / "hwloc" / "two-gpu-node.xml").string()});
    REQUIRE(n.ok());
    auto has = [&](const std::string& p) {
        return std::find(n->properties.begin(), n->properties.end(), p) != n->properties.end();
    };
    INFO(fmt::format("{}", fmt::join(n->properties, " ")));
    // Both GPUs are NVIDIA's; the XML names no model, so the PCI device id.
    CHECK(has("gpu-vendor=nvidia"));
    CHECK(has("gpu-model=0x20b0"));
    CHECK(has("memory-gib=8"));
    // The XML names no architecture: this machine's, whatever it is.
    CHECK(std::any_of(n->properties.begin(), n->properties.end(),
                      [](const std::string& p) { return p.rfind("arch=", 0) == 0; }));
    // A CPU model with blanks and parentheses becomes one name.
    auto synthetic = discover_node(0, "sim", {.synthetic = "pack:1 core:2 pu:1"});
    REQUIRE(synthetic.ok());
    for (const auto& p : synthetic->properties)
        CHECK(check_property_name(p).ok());
}

TEST_CASE("discovery of this machine applies its limits", "[discovery]") {
    auto n = discover_node(0, "here", {.limits = CgroupLimits{.max_cores = 1u}});
    REQUIRE(n.ok());
    CHECK(n->cores().count() == 1);
    auto all = discover_node(0, "here", {});
    REQUIRE(all.ok());
    CHECK(all->cores().count() >= 1);
    CHECK(all->cores().count() <= static_cast<uint64_t>(sysconf(_SC_NPROCESSORS_ONLN)));
}

TEST_CASE("discovery names a topology it cannot load", "[discovery][malformed]") {
    auto xml = discover_node(0, "h", {.xml_path = "/nonexistent/topo.xml"});
    REQUIRE(!xml.ok());
    CHECK(xml.error().message.find("/nonexistent/topo.xml") != std::string::npos);
    auto syn = discover_node(0, "h", {.synthetic = "pack:x"});
    REQUIRE(!syn.ok());
    CHECK(syn.error().message.find("pack:x") != std::string::npos);
}

TEST_CASE("machine topology: saved as XML, loaded back the same", "[resource]") {
    auto discovered = MachineTopology::discover();
    REQUIRE(discovered);  // the unit tests run on a real machine
    REQUIRE(!discovered->core_cpus().empty());
    char dir[] = "/tmp/banyan-topo-XXXXXX";
    REQUIRE(mkdtemp(dir));
    std::string path = std::string(dir) + "/topology.xml";
    REQUIRE(discovered->save_xml(path).ok());
    auto loaded = MachineTopology::load_xml(path);
    REQUIRE(loaded.ok());
    CHECK((*loaded)->core_cpus() == discovered->core_cpus());
    unlink(path.c_str());
    rmdir(dir);

    auto missing = MachineTopology::load_xml(path);
    REQUIRE(!missing.ok());
    CHECK(missing.error().message == fmt::format("topology {}: cannot be loaded", path));
    CHECK(!discovered->save_xml("/nonexistent/dir/topology.xml").ok());
}
