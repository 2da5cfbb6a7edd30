#include "shell/binding.hpp"

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

}  // namespace banyan
