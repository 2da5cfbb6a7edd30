#include "sched/taskmap.hpp"

#include <fmt/format.h>

namespace banyan {
namespace {

struct SlotShape {
    bool under_node = false;
    uint64_t count = 0;  // per node when under_node, else in all
    uint64_t cores = 0;  // per slot
    uint64_t gpus = 0;
};

uint64_t count_under(const JobspecResource& r, const std::string& type) {
    uint64_t n = 0;
    for (const auto& child : r.with)
        n += child.type == type ? child.count.min : child.count.min * count_under(child, type);
    return n;
}

bool find_slot(const std::vector<JobspecResource>& level, bool under_node, SlotShape& out) {
    for (const auto& r : level) {
        if (r.type == "slot") {
            out = {under_node, r.count.min, count_under(r, "core"), count_under(r, "gpu")};
            return true;
        }
        if (find_slot(r.with, under_node || r.type == "node", out))
            return true;
    }
    return false;
}

}  // namespace

const TaskMap::Block* TaskMap::find(uint32_t rank) const {
    for (const auto& b : blocks)
        if (b.rank == rank)
            return &b;
    return nullptr;
}

Result<TaskMap> TaskMap::compute(const Jobspec& spec, const Rv1& R) {
    if (spec.tasks.empty())
        return make_error(EINVAL, "jobspec: no tasks");
    SlotShape slot;
    if (!find_slot(spec.resources, false, slot) || slot.count == 0)
        return make_error(EINVAL, "jobspec: no slot");
    TaskMap map;
    uint64_t slots_left = slot.count;
    for (const auto& [rank, children] : R.ranks) {
        uint64_t slots;
        if (slot.under_node) {
            slots = slot.count;
        } else {
            uint64_t fit = slot.cores > 0  ? children.cores.count() / slot.cores
                           : slot.gpus > 0 ? children.gpus.count() / slot.gpus
                                           : slots_left;
            slots = std::min(fit, slots_left);
            slots_left -= slots;
        }
        map.blocks.push_back({rank, 0, 0, static_cast<uint32_t>(slots)});
    }
    uint64_t total_slots = 0;
    for (const auto& b : map.blocks)
        total_slots += b.nslots;
    if (total_slots == 0)
        return make_error(EINVAL, "R holds no slot of the jobspec");
    const JobspecTask& task = spec.tasks[0];
    uint64_t slot_index = 0;
    for (auto& b : map.blocks) {
        uint64_t n = 0;
        if (task.count_kind == "total") {
            for (uint32_t s = 0; s < b.nslots; s++, slot_index++)
                n += task.count / total_slots + (slot_index < task.count % total_slots ? 1 : 0);
        } else if (task.count_kind == "per_resource") {
            const auto& children = R.ranks.at(b.rank);
            if (task.per_resource_type == "node")
                n = task.count;
            else if (task.per_resource_type == "core")
                n = task.count * children.cores.count();
            else
                return make_error(EINVAL, fmt::format("tasks[0].count.per_resource.type: {}: expected node or core",
                                                      task.per_resource_type));
        } else {
            n = task.count * b.nslots;
        }
        b.first_task = map.ntasks;
        b.ntasks = static_cast<uint32_t>(n);
        map.ntasks += b.ntasks;
    }
    return map;
}

}  // namespace banyan
