#include "resource/discovery.hpp"

#include <cctype>
#include <cstdlib>
#include <memory>
#include <set>
#include <string_view>

#include <sys/utsname.h>

#include <fmt/format.h>
#include <hwloc.h>

namespace banyan {
namespace {

struct TopologyDeleter {
    void operator()(hwloc_topology_t t) const { hwloc_topology_destroy(t); }
};
using Topology = std::unique_ptr<hwloc_topology, TopologyDeleter>;

struct BitmapDeleter {
    void operator()(hwloc_bitmap_t b) const { hwloc_bitmap_free(b); }
};
using Bitmap = std::unique_ptr<hwloc_bitmap_s, BitmapDeleter>;

constexpr unsigned kNvidia = 0x10de;
constexpr unsigned kAmd = 0x1002;

bool has_gpu_osdev(hwloc_obj_t pci) {
    for (hwloc_obj_t child = pci->io_first_child; child; child = child->next_sibling) {
        if (child->type == HWLOC_OBJ_OS_DEVICE &&
            (child->attr->osdev.type == HWLOC_OBJ_OSDEV_GPU || child->attr->osdev.type == HWLOC_OBJ_OSDEV_COPROC))
            return true;
    }
    return false;
}

bool gpu_by_class(hwloc_obj_t pci) {
    unsigned cls = pci->attr->pcidev.class_id;
    unsigned vendor = pci->attr->pcidev.vendor_id;
    if (cls == 0x0302 || cls == 0x0380)
        return true;
    return cls == 0x0300 && (vendor == kNvidia || vendor == kAmd);
}

// Index of the package holding `obj` (its nearest non-I/O ancestor), or 0.
size_t socket_of(hwloc_topology_t topo, hwloc_obj_t obj, const std::vector<hwloc_obj_t>& packages) {
    hwloc_obj_t anchor = hwloc_get_non_io_ancestor_obj(topo, obj);
    for (size_t i = 0; i < packages.size(); i++)
        if (anchor && hwloc_bitmap_isincluded(anchor->cpuset, packages[i]->cpuset))
            return i;
    return 0;
}

Result<Topology> load_topology(const DiscoveryOptions& options) {
    hwloc_topology_t raw = nullptr;
    if (hwloc_topology_init(&raw) != 0)
        return make_error(ENOMEM, "hwloc: cannot initialise a topology");
    Topology topo(raw);
    hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (!options.xml_path.empty() && hwloc_topology_set_xml(raw, options.xml_path.c_str()) != 0)
        return make_error(EINVAL, fmt::format("hwloc XML {}: {}", options.xml_path, std::strerror(errno)));
    // So that binding queries answer for this machine, as when discovered.
    if (options.xml_is_this_machine && hwloc_topology_set_flags(raw, HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM) != 0)
        return make_error(EINVAL, "hwloc: cannot take the XML for this machine");
    if (!options.synthetic.empty() && hwloc_topology_set_synthetic(raw, options.synthetic.c_str()) != 0)
        return make_error(EINVAL, fmt::format("hwloc synthetic '{}': not a valid description", options.synthetic));
    if (hwloc_topology_load(raw) != 0)
        return make_error(errno ? errno : EIO,
                          fmt::format("hwloc: cannot load the topology: {}", std::strerror(errno)));
    return topo;
}

// A value as part of a property name: runs of blanks and of the
// characters a name may not hold become one '-' ("Intel(R) Xeon(R)" ->
// "Intel-R-Xeon-R").
std::string name_part(std::string_view value) {
    std::string out;
    for (char c : value) {
        bool keep = !std::isspace(static_cast<unsigned char>(c)) &&
                    std::string_view(",()\"'^").find(c) == std::string_view::npos;
        if (keep)
            out += c;
        else if (!out.empty() && out.back() != '-')
            out += '-';
    }
    while (!out.empty() && out.back() == '-')
        out.pop_back();
    return out;
}

const char* info(hwloc_obj_t obj, const char* name) {
    const char* v = obj ? hwloc_obj_get_info_by_name(obj, name) : nullptr;
    return v && *v ? v : nullptr;
}

std::string gpu_vendor(unsigned id) {
    switch (id) {
        case kNvidia:
            return "nvidia";
        case kAmd:
            return "amd";
        case 0x8086:
            return "intel";
        default:
            return fmt::format("0x{:04x}", id);
    }
}

// Features of the node that need no config, named as Kubernetes' Node
// Feature Discovery labels them (doc/spec/resources.md section 2).
std::vector<std::string> discovered_properties(hwloc_topology_t topo, const NodeDescription& node,
                                               const std::vector<hwloc_obj_t>& gpus) {
    std::set<std::string> out;
    auto add = [&](const std::string& key, std::string_view value) {
        if (std::string part = name_part(value); !part.empty())
            out.insert(key + "=" + part);
    };
    hwloc_obj_t root = hwloc_get_root_obj(topo);
    if (const char* arch = info(root, "Architecture")) {
        add("arch", arch);
    } else {
        struct utsname u {};
        if (uname(&u) == 0)
            add("arch", u.machine);
    }
    for (hwloc_obj_t p = nullptr; (p = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PACKAGE, p));) {
        if (const char* vendor = info(p, "CPUVendor"))
            add("cpu-vendor", vendor);
        if (const char* model = info(p, "CPUModel"))
            add("cpu-model", model);
    }
    for (hwloc_obj_t pci : gpus) {
        add("gpu-vendor", gpu_vendor(pci->attr->pcidev.vendor_id));
        const char* model = info(pci, "PCIDevice");
        for (hwloc_obj_t os = pci->io_first_child; !model && os; os = os->next_sibling)
            model = info(os, "GPUModel");
        add("gpu-model", model ? std::string(model) : fmt::format("0x{:04x}", pci->attr->pcidev.device_id));
    }
    if (uint64_t gib = node.memory() >> 30; gib > 0)
        out.insert(fmt::format("memory-gib={}", gib));
    return {out.begin(), out.end()};
}

bool describes_this_machine(const DiscoveryOptions& options) {
    auto set = [](const char* name) { return std::getenv(name) && *std::getenv(name); };
    if (set("HWLOC_XMLFILE") || set("HWLOC_SYNTHETIC"))
        return false;
    if (options.xml_is_this_machine)
        return true;
    return options.xml_path.empty() && options.synthetic.empty() && !set("HWLOC_XMLFILE") && !set("HWLOC_SYNTHETIC");
}

}  // namespace

void apply_limits(NodeDescription& node, const CgroupLimits& limits) {
    if (limits.max_cores) {
        uint32_t left = *limits.max_cores;
        for (auto& socket : node.sockets) {
            IdSet kept;
            for (uint32_t core : socket.cores.ids()) {
                if (left == 0)
                    break;
                kept.insert(core);
                left--;
            }
            socket.cores = kept;
        }
    }
    if (limits.max_memory) {
        uint64_t total = node.memory();
        for (auto it = node.sockets.rbegin(); it != node.sockets.rend() && total > *limits.max_memory; ++it) {
            uint64_t cut = std::min(it->memory, total - *limits.max_memory);
            it->memory -= cut;
            total -= cut;
        }
    }
}

void skip_unneeded_hwloc_plugins() {
    setenv("HWLOC_PLUGINS_BLACKLIST", "hwloc_gl,hwloc_xml_libxml", 0);
}

void keep_hwloc_plugins_loaded() {
    // hwloc loads its plugins with its first topology and unloads them
    // with its last: this one is never destroyed.
    static hwloc_topology_t kept = nullptr;
    if (!kept && hwloc_topology_init(&kept) != 0)
        kept = nullptr;
}

Result<void> export_this_machine(const std::string& path) {
    auto loaded = load_topology({});
    if (!loaded)
        return loaded.error();
    if (hwloc_topology_export_xml(loaded->get(), path.c_str(), 0) != 0)
        return make_error(errno ? errno : EIO, fmt::format("hwloc: cannot write {}: {}", path, std::strerror(errno)));
    return {};
}

Result<NodeDescription> discover_node(uint32_t rank, const std::string& hostname, const DiscoveryOptions& options) {
    auto loaded = load_topology(options);
    if (!loaded)
        return loaded.error();
    hwloc_topology_t topo = loaded->get();
    bool this_machine = describes_this_machine(options);
    if (this_machine) {
        // Keep only the CPUs this process may run on (taskset, cpuset cgroup).
        Bitmap bound(hwloc_bitmap_alloc());
        if (hwloc_get_cpubind(topo, bound.get(), HWLOC_CPUBIND_PROCESS) == 0 && !hwloc_bitmap_iszero(bound.get()))
            hwloc_topology_restrict(topo, bound.get(), 0);
    }

    std::vector<hwloc_obj_t> packages;
    for (hwloc_obj_t p = nullptr; (p = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PACKAGE, p));)
        packages.push_back(p);
    NodeDescription node;
    node.rank = rank;
    node.hostname = hostname;
    node.sockets.resize(std::max<size_t>(1, packages.size()));

    for (hwloc_obj_t core = nullptr; (core = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_CORE, core));)
        node.sockets[socket_of(topo, core, packages)].cores.insert(core->logical_index);
    for (hwloc_obj_t numa = nullptr; (numa = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, numa));)
        node.sockets[socket_of(topo, numa, packages)].memory += numa->attr->numanode.local_memory;
    uint32_t next_gpu = 0;
    std::vector<hwloc_obj_t> gpus;
    for (hwloc_obj_t pci = nullptr; (pci = hwloc_get_next_pcidev(topo, pci));) {
        if (has_gpu_osdev(pci) || gpu_by_class(pci)) {
            node.sockets[socket_of(topo, pci, packages)].gpus.insert(next_gpu++);
            gpus.push_back(pci);
        }
    }
    if (this_machine && options.limits)
        apply_limits(node, *options.limits);
    node.properties = discovered_properties(topo, node, gpus);
    if (node.cores().empty())
        return make_error(ENODEV, fmt::format("{}: hwloc found no core this broker may use", hostname));
    return node;
}

}  // namespace banyan
