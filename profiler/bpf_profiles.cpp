#include "profiler/bpf_profiles.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <tuple>

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fmt/format.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include <csignal>

#include "profiler/profile_maps.h"
#include "profile.skel.h"

namespace banyan {

namespace {

constexpr size_t kTreeGroup = 5;
// What the node report keeps of each list: the busiest first.
constexpr size_t kMaxFiles = 64, kMaxPrefixes = 32, kMaxConnections = 256, kMaxSegments = 64;

// libbpf's last words, for a refusal's one line.
std::string g_libbpf_said;

// (A callback from C: nothing may escape it.)
int keep_libbpf_message(libbpf_print_level level, const char* format, va_list args) noexcept {
    if (level == LIBBPF_DEBUG)
        return 0;
    char line[512];
    std::vsnprintf(line, sizeof line, format, args);
    size_t n = strnlen(line, sizeof line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == ' '))
        n--;
    if (n > 0) {
        try {
            g_libbpf_said.assign(line, n);
        } catch (...) {
        }
    }
    return 0;
}

// Its group: the five programs by their names' prefix, then the tree.
size_t group_of(const bpf_program* prog) {
    std::string name = bpf_program__name(prog);
    for (size_t g = 0; g < kProfilePrograms.size(); g++)
        if (name.rfind(std::string(kProfilePrograms[g]) + "_", 0) == 0)
            return g;
    return kTreeGroup;
}

// A skeleton with only the groups in `groups` (a bit mask) loaded.
Result<profile*> open_and_load(unsigned groups) {
    g_libbpf_said.clear();
    profile* skel = profile__open();
    if (!skel)
        return make_error(errno, fmt::format("cannot open the BPF object: {}", g_libbpf_said));
    bpf_program* prog;
    bpf_object__for_each_program(prog, skel->obj) {
        bpf_program__set_autoload(prog, (groups >> group_of(prog)) & 1);
    }
    if (int rc = profile__load(skel); rc != 0) {
        profile__destroy(skel);
        return make_error(-rc, g_libbpf_said.empty() ? std::strerror(-rc) : g_libbpf_said);
    }
    return skel;
}

template <class K, class V>
void for_each_entry(int fd, const std::function<void(const K&, const V&)>& f) {
    K key{}, next{};
    K* prev = nullptr;
    while (bpf_map_get_next_key(fd, prev, &next) == 0) {
        V value{};
        if (bpf_map_lookup_elem(fd, &next, &value) == 0)
            f(next, value);
        key = next;
        prev = &key;
    }
}

// Deletes the entries whose key and value `matches`, once the walk is
// over (a key deleted during it would restart get_next_key).
template <class K, class V>
void delete_where(int fd, const std::function<bool(const K&, const V&)>& matches) {
    std::vector<K> doomed;
    for_each_entry<K, V>(fd, [&](const K& k, const V& v) {
        if (matches(k, v))
            doomed.push_back(k);
    });
    for (const K& k : doomed)
        bpf_map_delete_elem(fd, &k);
}

double seconds(uint64_t ns) {
    return static_cast<double>(ns) / 1e9;
}

std::string endpoint(uint16_t family, const uint8_t* addr, uint16_t port) {
    char text[INET6_ADDRSTRLEN] = "?";
    inet_ntop(family == 2 ? AF_INET : AF_INET6, addr, text, sizeof text);
    return family == 2 ? fmt::format("{}:{}", text, port) : fmt::format("[{}]:{}", text, port);
}

// "/usr/lib/x/y" -> "/usr/lib": two components, what the report groups by.
std::string path_prefix(const std::string& path) {
    size_t slash = 0;
    for (int component = 0; component < 2; component++) {
        slash = path.find('/', slash + 1);
        if (slash == std::string::npos)
            return path.substr(0, path.rfind('/') == 0 ? path.size() : path.rfind('/'));
    }
    return path.substr(0, slash);
}

}  // namespace

Result<std::unique_ptr<BpfProfiles>> BpfProfiles::load() {
    libbpf_set_print(keep_libbpf_message);
    struct stat st {};
    if (stat("/sys/kernel/btf/vmlinux", &st) != 0)
        return make_error(ENOTSUP, "this kernel has no BTF (/sys/kernel/btf/vmlinux): its BPF programs cannot load");
    // Syscall tracepoints are found by their ids in tracefs: mounted where
    // it is not (a fresh boot mounts it only on first use).
    if (stat("/sys/kernel/tracing/events", &st) != 0 && stat("/sys/kernel/debug/tracing/events", &st) != 0 &&
        mount("nodev", "/sys/kernel/tracing", "tracefs", 0, nullptr) != 0)
        return make_error(errno, fmt::format("tracefs is not mounted and cannot be, on /sys/kernel/tracing: {}",
                                             std::strerror(errno)));
    // Pids from the broker are the kernel's only in the initial pid
    // namespace (a container has its own: nothing would be counted).
    char ns[64] = {};
    if (readlink("/proc/self/ns/pid", ns, sizeof ns - 1) > 0 && std::string(ns) != "pid:[4026531836]")
        return make_error(ENOTSUP, "banyan-profiler runs in a pid namespace of its own (a container): the pids it is "
                                   "given are not the kernel's");
    auto profiles = std::unique_ptr<BpfProfiles>(new BpfProfiles());
    // The tree first: without it nothing can be counted.
    auto tree = open_and_load(1u << kTreeGroup);
    if (!tree)
        return make_error(tree.error().code, fmt::format("the kernel refuses the process-tree program: {}",
                                                          tree.error().message));
    profile__destroy(*tree);
    unsigned groups = 1u << kTreeGroup;
    for (size_t g = 0; g < kProfilePrograms.size(); g++) {
        auto one = open_and_load((1u << kTreeGroup) | (1u << g));
        if (one) {
            profile__destroy(*one);
            groups |= 1u << g;
        } else {
            profiles->refused_[g] = one.error().message;
        }
    }
    auto all = open_and_load(groups);
    if (!all)
        return make_error(all.error().code, fmt::format("loading the programs: {}", all.error().message));
    profiles->skel_ = *all;
    return profiles;
}

BpfProfiles::~BpfProfiles() {
    for (auto& group : links_)
        for (bpf_link* link : group)
            bpf_link__destroy(link);
    if (skel_)
        profile__destroy(skel_);
}

Result<void> BpfProfiles::attach(size_t group) {
    if (users_[group] > 0 || !links_[group].empty()) {
        users_[group]++;
        return {};  // (attached still: detach_idle had not come to it)
    }
    bpf_program* prog;
    bpf_object__for_each_program(prog, skel_->obj) {
        if (group_of(prog) != group || !bpf_program__autoload(prog))
            continue;
        bpf_link* link = bpf_program__attach(prog);
        if (!link) {
            std::string why = fmt::format("cannot attach {}: {}", bpf_program__name(prog), g_libbpf_said);
            for (bpf_link* made : links_[group])
                bpf_link__destroy(made);
            links_[group].clear();
            return make_error(EIO, why);
        }
        links_[group].push_back(link);
    }
    users_[group]++;
    return {};
}

void BpfProfiles::detach(size_t group) {
    if (users_[group] > 0 && --users_[group] == 0)
        unused_since_[group] = std::chrono::steady_clock::now();
}

void BpfProfiles::detach_idle(std::chrono::seconds idle) {
    auto now = std::chrono::steady_clock::now();
    for (size_t group = 0; group < links_.size(); group++) {
        if (users_[group] > 0 || links_[group].empty() || now - unused_since_[group] < idle)
            continue;
        for (bpf_link* link : links_[group])
            bpf_link__destroy(link);
        links_[group].clear();
    }
}

Result<void> BpfProfiles::track(uint64_t job, pid_t shell_pid, unsigned programs, uint32_t uid) {
    // A run of the job whose end was never told (its broker lost it):
    // its shell is gone, and so is it.
    if (auto old = jobs_.find(job); old != jobs_.end() && kill(old->second.shell, 0) != 0 && errno == ESRCH)
        untrack(job);
    if (jobs_.count(job))
        return make_error(EEXIST, fmt::format("job {} is profiled already", job));
    for (size_t g = 0; g < kProfilePrograms.size(); g++)
        if ((programs >> g & 1) && !refused_[g].empty())
            return make_error(ENOTSUP, fmt::format("the kernel refuses the {} program: {}", kProfilePrograms[g],
                                                   refused_[g]));
    // Attached first: a program that cannot be is said now, and nothing
    // of the job is left behind.
    std::vector<size_t> attached;
    for (size_t g : {kTreeGroup, size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{4}}) {
        if (g != kTreeGroup && !(programs >> g & 1))
            continue;
        if (auto r = attach(g); !r) {
            for (size_t done : attached)
                detach(done);
            return r.error();
        }
        attached.push_back(g);
    }
    banyan_tracked shell{.job = job,
                         .root = 0,
                         .flags = BANYAN_TRACKED_SHELL,
                         .programs = static_cast<__u16>(programs),
                         .uid = uid,
                         .pad = 0};
    uint32_t pid = static_cast<uint32_t>(shell_pid);
    if (bpf_map_update_elem(bpf_map__fd(skel_->maps.tracked), &pid, &shell, BPF_NOEXIST) != 0) {
        int err = errno;
        for (size_t done : attached)
            detach(done);
        return make_error(err, fmt::format("cannot track pid {}: {}", pid, std::strerror(err)));
    }
    jobs_[job] = Job{.programs = programs, .shell = shell_pid, .rank_of = {}};
    return {};
}

void BpfProfiles::name_tasks(uint64_t job, const std::vector<std::pair<pid_t, uint32_t>>& tasks) {
    auto it = jobs_.find(job);
    if (it == jobs_.end())
        return;
    // Only the job's own roots (the shell, which runs as the job's user,
    // says which is which rank: it may name nothing else), and no more
    // than there can be.
    int fd = bpf_map__fd(skel_->maps.tracked);
    for (auto [pid, rank] : tasks) {
        banyan_tracked t{};
        uint32_t key = static_cast<uint32_t>(pid);
        if (it->second.rank_of.size() >= BANYAN_MAX_TASKS || bpf_map_lookup_elem(fd, &key, &t) != 0 ||
            t.job != job || t.root != key)
            continue;
        it->second.rank_of[key] = rank;
    }
}

std::map<uint64_t, nlohmann::json> BpfProfiles::read(const std::set<uint64_t>& wanted, size_t top) const {
    // Per rank (several roots may share one: a task's restarts), summed.
    struct RankTotals {
        std::optional<banyan_cpu_stats> cpu;
        std::optional<banyan_futex_stats> futex;
    };
    // What a job's entries add up to: one pass over each map serves every
    // job asked for, so a tick's cost does not grow with their number.
    struct Reading {
        const Job* job = nullptr;
        std::map<std::string, RankTotals> totals;
        std::map<std::tuple<std::string, std::string, std::string>, banyan_tcp_stats> connections;
        std::vector<nlohmann::json> shm, files;
        std::map<std::pair<std::string, std::string>, banyan_file_stats> prefixes;
        std::string rank_name(uint32_t root) const {
            auto r = job->rank_of.find(root);
            return r == job->rank_of.end() ? std::string("other") : std::to_string(r->second);
        }
    };
    std::map<uint64_t, Reading> readings;
    for (uint64_t id : wanted)
        if (auto it = jobs_.find(id); it != jobs_.end()) {
            Reading& r = readings[id];
            r.job = &it->second;
            // Every task shows, with nothing where nothing was counted.
            for (auto [root, rank] : it->second.rank_of)
                r.totals[std::to_string(rank)];
        }
    auto reading = [&](uint64_t id) -> Reading* {
        auto r = readings.find(id);
        return r == readings.end() ? nullptr : &r->second;
    };
    if (readings.empty())
        return {};

    for_each_entry<banyan_task_key, banyan_cpu_stats>(
        bpf_map__fd(skel_->maps.cpu_stats), [&](const banyan_task_key& k, const banyan_cpu_stats& s) {
            Reading* r = reading(k.job);
            if (!r)
                return;
            auto& cpu = r->totals[r->rank_name(k.root)].cpu;
            if (!cpu)
                cpu = banyan_cpu_stats{};
            cpu->oncpu_ns += s.oncpu_ns, cpu->runq_ns += s.runq_ns;
            cpu->switches += s.switches, cpu->migrations += s.migrations;
        });
    // The slices running now, which only their end would count: a task
    // that has a CPU to itself is seldom switched out.
    timespec mono{};
    clock_gettime(CLOCK_MONOTONIC, &mono);  // bpf_ktime_get_ns's clock
    uint64_t now = static_cast<uint64_t>(mono.tv_sec) * 1000000000 + static_cast<uint64_t>(mono.tv_nsec);
    for_each_entry<uint32_t, banyan_running>(
        bpf_map__fd(skel_->maps.oncpu_since), [&](const uint32_t&, const banyan_running& running) {
            Reading* r = reading(running.key.job);
            if (!r || now <= running.since)
                return;
            auto& cpu = r->totals[r->rank_name(running.key.root)].cpu;
            if (!cpu)
                cpu = banyan_cpu_stats{};
            cpu->oncpu_ns += now - running.since;
        });
    for_each_entry<banyan_task_key, banyan_futex_stats>(
        bpf_map__fd(skel_->maps.futex_stats), [&](const banyan_task_key& k, const banyan_futex_stats& s) {
            Reading* r = reading(k.job);
            if (!r)
                return;
            auto& futex = r->totals[r->rank_name(k.root)].futex;
            if (!futex)
                futex = banyan_futex_stats{};
            futex->waits += s.waits, futex->wait_ns += s.wait_ns;
            for (size_t i = 0; i < BANYAN_FUTEX_SLOTS; i++)
                futex->hist[i] += s.hist[i];
        });
    for_each_entry<banyan_tcp_key, banyan_tcp_stats>(
        bpf_map__fd(skel_->maps.tcp_stats), [&](const banyan_tcp_key& k, const banyan_tcp_stats& s) {
            Reading* r = reading(k.job);
            if (!r)
                return;
            auto& c = r->connections[{r->rank_name(k.root), endpoint(k.family, k.local_addr, k.local_port),
                                      endpoint(k.family, k.remote_addr, k.remote_port)}];
            c.sent += s.sent, c.received += s.received, c.retransmits += s.retransmits;
            c.connects += s.connects, c.accepts += s.accepts;
        });
    for_each_entry<banyan_shm_key, banyan_shm_stats>(
        bpf_map__fd(skel_->maps.shm_stats), [&](const banyan_shm_key& k, const banyan_shm_stats& s) {
            Reading* r = reading(k.job);
            if (!r)
                return;
            std::string name(k.name, strnlen(k.name, sizeof k.name));
            bool sysv = s.sysv || name.starts_with("SYSV") || name.starts_with("shmid");
            r->shm.push_back({{"rank", r->rank_name(k.root)},
                              {"kind", sysv ? "sysv" : "posix"},
                              {"name", sysv ? name : "/dev/shm/" + name},
                              {"opens", s.opens},
                              {"maps", s.maps},
                              {"mapped", s.mapped_bytes},
                              {"size", s.size}});
        });
    for_each_entry<banyan_file_key, banyan_file_stats>(
        bpf_map__fd(skel_->maps.file_stats), [&](const banyan_file_key& k, const banyan_file_stats& s) {
            Reading* r = reading(k.job);
            if (!r)
                return;
            std::string fs(k.fs, strnlen(k.fs, sizeof k.fs)), path(k.path, strnlen(k.path, sizeof k.path));
            r->files.push_back({{"rank", r->rank_name(k.root)},
                                {"fs", fs},
                                {"path", path},
                                {"opens", s.opens},
                                {"reads", s.reads},
                                {"read_bytes", s.read_bytes},
                                {"read_time", seconds(s.read_ns)},
                                {"writes", s.writes},
                                {"write_bytes", s.write_bytes},
                                {"write_time", seconds(s.write_ns)}});
            auto& p = r->prefixes[{fs, path_prefix(path)}];
            p.opens += s.opens, p.reads += s.reads, p.read_bytes += s.read_bytes, p.read_ns += s.read_ns;
            p.writes += s.writes, p.write_bytes += s.write_bytes, p.write_ns += s.write_ns;
        });
    // Counted nowhere because a map was full (every job of the node).
    uint64_t dropped = 0;
    for (uint32_t i = 0; i < BANYAN_PROGRAMS; i++) {
        uint64_t n = 0;
        if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.dropped), &i, &n) == 0)
            dropped += n;
    }

    auto busiest = [](std::vector<nlohmann::json>& list, const char* a, const char* b, size_t keep) {
        std::sort(list.begin(), list.end(), [&](const nlohmann::json& x, const nlohmann::json& y) {
            return x[a].get<uint64_t>() + x[b].get<uint64_t>() > y[a].get<uint64_t>() + y[b].get<uint64_t>();
        });
        if (list.size() > keep)
            list.resize(keep);
    };
    std::map<uint64_t, nlohmann::json> out;
    for (auto& [id, r] : readings) {
        nlohmann::json programs = nlohmann::json::array();
        for (size_t g = 0; g < kProfilePrograms.size(); g++)
            if (r.job->programs >> g & 1)
                programs.push_back(kProfilePrograms[g]);
        nlohmann::json ranks = nlohmann::json::object();
        for (auto& [rank, t] : r.totals) {
            nlohmann::json entry = nlohmann::json::object();
            if (t.cpu)
                entry["cpu"] = {{"oncpu", seconds(t.cpu->oncpu_ns)},
                                {"runq", seconds(t.cpu->runq_ns)},
                                {"switches", t.cpu->switches},
                                {"migrations", t.cpu->migrations}};
            if (t.futex) {
                // hist[i]: waits of 2^i to 2^(i+1) microseconds (the first:
                // under 2); trailing empty slots left out.
                std::vector<uint64_t> hist(t.futex->hist, t.futex->hist + BANYAN_FUTEX_SLOTS);
                while (!hist.empty() && hist.back() == 0)
                    hist.pop_back();
                entry["futex"] = {{"waits", t.futex->waits}, {"wait", seconds(t.futex->wait_ns)}, {"hist", hist}};
            }
            ranks[rank] = std::move(entry);
        }
        std::vector<nlohmann::json> tcp;
        uint64_t tcp_sent = 0, tcp_received = 0;
        for (auto& [k, c] : r.connections) {
            tcp_sent += c.sent, tcp_received += c.received;
            tcp.push_back({{"rank", std::get<0>(k)},
                           {"local", std::get<1>(k)},
                           {"peer", std::get<2>(k)},
                           {"sent", c.sent},
                           {"received", c.received},
                           {"retransmits", c.retransmits},
                           {"connects", c.connects},
                           {"accepts", c.accepts}});
        }
        busiest(tcp, "sent", "received", std::min(kMaxConnections, top));
        busiest(r.shm, "mapped", "size", std::min(kMaxSegments, top));
        banyan_file_stats file_totals{};
        std::vector<nlohmann::json> by_prefix;
        for (auto& [k, p] : r.prefixes) {
            file_totals.read_bytes += p.read_bytes, file_totals.write_bytes += p.write_bytes;
            file_totals.read_ns += p.read_ns, file_totals.write_ns += p.write_ns;
            by_prefix.push_back({{"fs", k.first},
                                 {"prefix", k.second},
                                 {"opens", p.opens},
                                 {"read_bytes", p.read_bytes},
                                 {"read_time", seconds(p.read_ns)},
                                 {"write_bytes", p.write_bytes},
                                 {"write_time", seconds(p.write_ns)}});
        }
        busiest(r.files, "read_bytes", "write_bytes", std::min(kMaxFiles, top));
        busiest(by_prefix, "read_bytes", "write_bytes", std::min(kMaxPrefixes, top));
        // Exact sums over every connection and file (the lists are cut).
        nlohmann::json sums{{"tcp_sent", tcp_sent},
                            {"tcp_received", tcp_received},
                            {"file_read_bytes", file_totals.read_bytes},
                            {"file_write_bytes", file_totals.write_bytes},
                            {"file_time", seconds(file_totals.read_ns + file_totals.write_ns)}};
        out[id] = {{"programs", programs}, {"ranks", ranks},          {"tcp", tcp},
                   {"shm", r.shm},         {"files", r.files},        {"prefixes", by_prefix},
                   {"totals", sums},       {"dropped", dropped}};
    }
    return out;
}

nlohmann::json BpfProfiles::untrack(uint64_t job) {
    auto it = jobs_.find(job);
    if (it == jobs_.end())
        return nullptr;
    nlohmann::json last = read({job}, SIZE_MAX)[job];
    unsigned programs = it->second.programs;
    remove_entries(job);
    jobs_.erase(it);
    for (size_t g = 0; g < kProfilePrograms.size(); g++)
        if (programs >> g & 1)
            detach(g);
    detach(kTreeGroup);
    return last;
}

void BpfProfiles::remove_entries(uint64_t job) {
    // Counters are keyed by job; the other maps hold it in their values.
    auto key_is = [job](const auto& k, const auto&) { return k.job == job; };
    delete_where<uint32_t, banyan_tracked>(bpf_map__fd(skel_->maps.tracked),
                                           [&](const uint32_t&, const banyan_tracked& t) { return t.job == job; });
    delete_where<banyan_task_key, banyan_cpu_stats>(bpf_map__fd(skel_->maps.cpu_stats), key_is);
    delete_where<uint32_t, banyan_running>(bpf_map__fd(skel_->maps.oncpu_since),
                                           [&](const uint32_t&, const banyan_running& r) { return r.key.job == job; });
    delete_where<banyan_task_key, banyan_futex_stats>(bpf_map__fd(skel_->maps.futex_stats), key_is);
    delete_where<banyan_tcp_key, banyan_tcp_stats>(bpf_map__fd(skel_->maps.tcp_stats), key_is);
    delete_where<banyan_shm_key, banyan_shm_stats>(bpf_map__fd(skel_->maps.shm_stats), key_is);
    delete_where<banyan_file_key, banyan_file_stats>(bpf_map__fd(skel_->maps.file_stats), key_is);
    delete_where<uint64_t, banyan_open_file>(bpf_map__fd(skel_->maps.open_files),
                                             [&](const uint64_t&, const banyan_open_file& o) { return o.key.job == job; });
    delete_where<uint64_t, banyan_task_key>(bpf_map__fd(skel_->maps.socket_owner),
                                            [&](const uint64_t&, const banyan_task_key& k) { return k.job == job; });
}

}  // namespace banyan
