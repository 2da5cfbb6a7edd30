#include "shell/binding.hpp"

#include <hwloc.h>

namespace banyan {
namespace {

// Items [i*n/parts, (i+1)*n/parts) of `ids`: an even split that gives
// every part at least one item when there are enough.
template <typename T>
std::vector<T> share(const std::vector<T>& ids, uint32_t part, uint32_t parts) {
    if (ids.empty() || parts == 0)
        return {};
    if (ids.size() < parts)  // more tasks than items: tasks share them round robin
        return {ids[part % ids.size()]};
    size_t begin = ids.size() * part / parts, end = ids.size() * (part + 1) / parts;
    return std::vector<T>(ids.begin() + static_cast<ptrdiff_t>(begin), ids.begin() + static_cast<ptrdiff_t>(end));
}

std::string comma_list(const std::vector<uint32_t>& ids) {
    std::string out;
    for (uint32_t id : ids)
        out += (out.empty() ? "" : ",") + std::to_string(id);
    return out;
}

}  // namespace

std::vector<TaskBinding> task_bindings(const std::vector<std::vector<int>>& core_cpus, const IdSet& cores,
                                       const IdSet& gpus, uint32_t ntasks, Affinity cpu, Affinity gpu) {
    std::vector<TaskBinding> out(ntasks);
    std::vector<uint32_t> core_ids = cores.ids();
    bool known = !core_cpus.empty();
    for (uint32_t c : core_ids)
        known = known && c < core_cpus.size();
    std::vector<uint32_t> gpu_ids = gpus.ids();
    for (uint32_t t = 0; t < ntasks; t++) {
        if (known && cpu != Affinity::off)
            for (uint32_t c : cpu == Affinity::on ? core_ids : share(core_ids, t, ntasks))
                out[t].cpus.insert(out[t].cpus.end(), core_cpus[c].begin(), core_cpus[c].end());
        if (gpu != Affinity::off && !gpu_ids.empty())
            out[t].gpus = comma_list(gpu == Affinity::on ? gpu_ids : share(gpu_ids, t, ntasks));
    }
    return out;
}

MachineTopology::MachineTopology() {
    hwloc_topology_t topo = nullptr;
    if (hwloc_topology_init(&topo) != 0)
        return;
    if (hwloc_topology_load(topo) != 0 || !hwloc_topology_is_thissystem(topo)) {
        hwloc_topology_destroy(topo);
        return;
    }
    hwloc_bitmap_t bound = hwloc_bitmap_alloc();
    if (hwloc_get_cpubind(topo, bound, HWLOC_CPUBIND_PROCESS) == 0 && !hwloc_bitmap_iszero(bound))
        hwloc_topology_restrict(topo, bound, 0);
    hwloc_bitmap_free(bound);
    topology_ = topo;
}

MachineTopology::~MachineTopology() {
    if (topology_)
        hwloc_topology_destroy(static_cast<hwloc_topology_t>(topology_));
}

std::vector<std::vector<int>> MachineTopology::core_cpus() const {
    std::vector<std::vector<int>> out;
    auto topo = static_cast<hwloc_topology_t>(topology_);
    for (hwloc_obj_t core = nullptr; topo && (core = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_CORE, core));) {
        std::vector<int> cpus;
        for (int cpu = hwloc_bitmap_first(core->cpuset); cpu >= 0; cpu = hwloc_bitmap_next(core->cpuset, cpu))
            cpus.push_back(cpu);
        out.push_back(std::move(cpus));
    }
    return out;
}

}  // namespace banyan
