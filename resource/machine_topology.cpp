#include "resource/machine_topology.hpp"

#include <cerrno>

#include <hwloc.h>
#include <unistd.h>

#include <fmt/format.h>

namespace banyan {

std::unique_ptr<MachineTopology> MachineTopology::discover() {
    hwloc_topology_t topo = nullptr;
    if (hwloc_topology_init(&topo) != 0)
        return nullptr;
    if (hwloc_topology_load(topo) != 0 || !hwloc_topology_is_thissystem(topo)) {
        hwloc_topology_destroy(topo);
        return nullptr;
    }
    hwloc_bitmap_t bound = hwloc_bitmap_alloc();
    if (hwloc_get_cpubind(topo, bound, HWLOC_CPUBIND_PROCESS) == 0 && !hwloc_bitmap_iszero(bound))
        hwloc_topology_restrict(topo, bound, 0);
    hwloc_bitmap_free(bound);
    return std::unique_ptr<MachineTopology>(new MachineTopology(topo));
}

Result<std::unique_ptr<MachineTopology>> MachineTopology::load_xml(const std::string& path) {
    hwloc_topology_t topo = nullptr;
    if (hwloc_topology_init(&topo) != 0)
        return make_error(ENOMEM, "hwloc: cannot create a topology");
    // Saved on this machine by this machine's exec service: binding with it
    // is binding this machine.
    if (hwloc_topology_set_xml(topo, path.c_str()) != 0 ||
        hwloc_topology_set_flags(topo, HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM) != 0 || hwloc_topology_load(topo) != 0) {
        int err = errno;
        hwloc_topology_destroy(topo);
        return make_error(err, fmt::format("topology {}: cannot be loaded", path));
    }
    return std::unique_ptr<MachineTopology>(new MachineTopology(topo));
}

MachineTopology::~MachineTopology() {
    hwloc_topology_destroy(static_cast<hwloc_topology_t>(topology_));
}

Result<void> MachineTopology::save_xml(const std::string& path) const {
    // Written aside and renamed: a shell never reads half a file.
    std::string partial = fmt::format("{}.{}", path, getpid());
    if (hwloc_topology_export_xml(static_cast<hwloc_topology_t>(topology_), partial.c_str(), 0) != 0 ||
        rename(partial.c_str(), path.c_str()) != 0) {
        int err = errno;
        unlink(partial.c_str());
        return make_error(err, fmt::format("topology {}: cannot be written", path));
    }
    return {};
}

std::vector<std::vector<int>> MachineTopology::core_cpus() const {
    std::vector<std::vector<int>> out;
    auto topo = static_cast<hwloc_topology_t>(topology_);
    for (hwloc_obj_t core = nullptr; (core = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_CORE, core));) {
        std::vector<int> cpus;
        for (int cpu = hwloc_bitmap_first(core->cpuset); cpu >= 0; cpu = hwloc_bitmap_next(core->cpuset, cpu))
            cpus.push_back(cpu);
        out.push_back(std::move(cpus));
    }
    return out;
}

}  // namespace banyan
