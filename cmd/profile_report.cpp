#include "cmd/profile_report.hpp"

#include <algorithm>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "core/byte_size.hpp"
#include "core/json_field.hpp"

namespace banyan {

namespace {

double number(const nlohmann::json& object, std::string_view key) {
    return json_field<double>(object, key, 0).value_or(0);
}

uint64_t count(const nlohmann::json& object, std::string_view key) {
    return json_field<uint64_t>(object, key, 0).value_or(0);
}

// A string of the profile, its control characters shown as '?': paths
// come from the job, and must not drive the reader's terminal.
std::string text(const nlohmann::json& object, std::string_view key) {
    std::string s = json_field<std::string>(object, key, "").value_or("");
    for (char& c : s)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
            c = '?';
    return s;
}

std::string task_name(const std::string& rank) {
    return rank == "other" ? "(not a task)" : "task " + rank;
}

// Task ranks sort by number, "other" last.
bool before(const std::string& a, const std::string& b) {
    auto key = [](const std::string& r) { return r == "other" ? UINT64_MAX : std::strtoull(r.c_str(), nullptr, 10); };
    return key(a) < key(b);
}

struct TaskWaits {
    std::string node, rank;
    double oncpu = 0, runq = 0, futex = 0, io = 0;
    uint64_t futex_waits = 0, switches = 0, migrations = 0;
};

}  // namespace

std::string profile_report(const std::string& job, const nlohmann::json& profile) {
    std::string out;
    std::vector<std::string> programs;
    for (const auto& p : json_array_at(profile, "programs"))
        if (p.is_string())
            programs.push_back(p.get<std::string>());
    bool complete = json_field<bool>(profile, "complete", false).value_or(false);
    const auto& nodes = json_object_at(profile, {"ranks"});
    out += fmt::format("{}: eBPF profile ({}), {}\n", job, fmt::join(programs, ", "),
                       complete ? "complete" : "while it runs (the latest sample of each node)");
    if (nodes.empty())
        return out + "  nothing yet: no node has sent a sample\n";

    // Where each task rank listens and sends from, to name TCP peers.
    std::map<std::string, std::string> endpoint_rank;
    std::vector<TaskWaits> waits;
    for (const auto& [node, data] : nodes.items()) {
        for (const auto& c : json_array_at(data, "tcp"))
            endpoint_rank[text(c, "local")] = text(c, "rank");
        std::map<std::string, double> io;
        for (const auto& f : json_array_at(data, "files"))
            io[text(f, "rank")] += number(f, "read_time") + number(f, "write_time");
        for (const auto& [rank, r] : json_object_at(data, {"ranks"}).items()) {
            const auto& cpu = json_object_at(r, {"cpu"});
            const auto& futex = json_object_at(r, {"futex"});
            waits.push_back({node, rank, number(cpu, "oncpu"), number(cpu, "runq"), number(futex, "wait"),
                             io[rank], count(futex, "waits"), count(cpu, "switches"), count(cpu, "migrations")});
        }
    }
    std::sort(waits.begin(), waits.end(), [](const TaskWaits& a, const TaskWaits& b) {
        return a.node != b.node ? std::strtoull(a.node.c_str(), nullptr, 10) < std::strtoull(b.node.c_str(), nullptr, 10)
                                : before(a.rank, b.rank);
    });

    out += "\nTime per task (seconds)\n";
    out += fmt::format("  {:<6} {:<14} {:>10} {:>10} {:>10} {:>10} {:>9} {:>10}\n", "node", "task", "on CPU",
                       "run queue", "futex", "file I/O", "switches", "migrations");
    for (const auto& w : waits)
        out += fmt::format("  {:<6} {:<14} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>9} {:>10}\n", w.node,
                           task_name(w.rank), w.oncpu, w.runq, w.futex, w.io, w.switches, w.migrations);

    std::vector<TaskWaits> by_futex = waits;
    std::sort(by_futex.begin(), by_futex.end(), [](const auto& a, const auto& b) { return a.futex > b.futex; });
    if (!by_futex.empty() && by_futex.front().futex_waits > 0) {
        out += "\nWaited most on futexes\n";
        for (size_t i = 0; i < by_futex.size() && i < 5 && by_futex[i].futex_waits > 0; i++)
            out += fmt::format("  {} on node {}: {:.3f} s in {} waits\n", task_name(by_futex[i].rank),
                               by_futex[i].node, by_futex[i].futex, by_futex[i].futex_waits);
    }

    bool any_tcp = false;
    for (const auto& [node, data] : nodes.items())
        for (const auto& c : json_array_at(data, "tcp")) {
            if (!any_tcp)
                out += "\nTCP, by connection (the busiest first on each node)\n";
            any_tcp = true;
            std::string peer = text(c, "peer");
            auto peer_rank = endpoint_rank.find(peer);
            std::string to = peer_rank == endpoint_rank.end() ? peer
                                                               : fmt::format("{} ({})", task_name(peer_rank->second), peer);
            out += fmt::format("  node {} {} -> {}: sent {}, received {}, {} retransmits, {} connects, {} accepts\n",
                               node, task_name(text(c, "rank")), to, format_byte_size(count(c, "sent")),
                               format_byte_size(count(c, "received")), count(c, "retransmits"), count(c, "connects"),
                               count(c, "accepts"));
        }

    bool any_shm = false;
    for (const auto& [node, data] : nodes.items())
        for (const auto& s : json_array_at(data, "shm")) {
            if (!any_shm)
                out += "\nShared memory\n";
            any_shm = true;
            out += fmt::format("  node {} {}: {} {} of {}: opened {}, mapped {} times ({})\n", node,
                               task_name(text(s, "rank")), text(s, "kind"), text(s, "name"),
                               format_byte_size(count(s, "size")), count(s, "opens"), count(s, "maps"),
                               format_byte_size(count(s, "mapped")));
        }

    // The ten busiest of each node here (--json has them all).
    constexpr size_t kShown = 10;
    bool any_file = false;
    for (const auto& [node, data] : nodes.items())
        for (size_t i = 0; i < json_array_at(data, "files").size() && i < kShown; i++) {
            const auto& f = json_array_at(data, "files")[i];
            if (!any_file)
                out += "\nBusiest files\n";
            any_file = true;
            out += fmt::format("  node {} {}: {} ({}): {} opens, read {} in {} ({:.3f} s), wrote {} in {} ({:.3f} s)\n",
                               node, task_name(text(f, "rank")), text(f, "path"), text(f, "fs"), count(f, "opens"),
                               format_byte_size(count(f, "read_bytes")), count(f, "reads"), number(f, "read_time"),
                               format_byte_size(count(f, "write_bytes")), count(f, "writes"), number(f, "write_time"));
        }
    bool any_prefix = false;
    for (const auto& [node, data] : nodes.items())
        for (size_t i = 0; i < json_array_at(data, "prefixes").size() && i < kShown; i++) {
            const auto& p = json_array_at(data, "prefixes")[i];
            if (!any_prefix)
                out += "\nBy path prefix\n";
            any_prefix = true;
            out += fmt::format("  node {} {} ({}): {} opens, read {}, wrote {}\n", node, text(p, "prefix"),
                               text(p, "fs"), count(p, "opens"), format_byte_size(count(p, "read_bytes")),
                               format_byte_size(count(p, "write_bytes")));
        }
    uint64_t dropped = 0;
    for (const auto& [node, data] : nodes.items())
        dropped += count(data, "dropped");
    if (dropped > 0)
        out += fmt::format("\n{} events were not counted: a map of the profiler was full\n", dropped);
    return out;
}

}  // namespace banyan
