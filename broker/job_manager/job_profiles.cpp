#include "broker/job_manager/job_profiles.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>
#include <pwd.h>
#include <unistd.h>

#include "core/json_field.hpp"

namespace banyan {

namespace {

constexpr const char* kPrograms[] = {"cpu", "futex", "tcp", "shm", "file"};

// A count or time a node sent: finite, not negative (the profiler runs as
// root, but its answer crosses the overlay).
double seconds_at(const nlohmann::json& object, std::string_view key) {
    double v = json_field<double>(object, key, 0, "profile").value_or(0);
    return std::isfinite(v) && v > 0 ? std::min(v, 1e12) : 0;
}

uint64_t count_at(const nlohmann::json& object, std::string_view key) {
    return std::min(json_field<uint64_t>(object, key, 0, "profile").value_or(0), uint64_t{1} << 60);
}

}  // namespace

Result<std::shared_ptr<const nlohmann::json>> read_ebpf_request(const nlohmann::json& system) {
    if (!system.contains("ebpf"))
        return std::shared_ptr<const nlohmann::json>();
    const auto& ebpf = system["ebpf"];
    if (!ebpf.is_object())
        return make_error(EINVAL, "attributes.system.ebpf: expected {programs, interval?, optional?}");
    for (const auto& [key, value] : ebpf.items())
        if (key != "programs" && key != "interval" && key != "optional")
            return make_error(EINVAL, fmt::format("attributes.system.ebpf: no field named \"{}\"", key));
    const auto& programs = json_array_at(ebpf, "programs");
    if (programs.empty())
        return make_error(EINVAL, "attributes.system.ebpf.programs: expected one or more of cpu, futex, tcp, shm, "
                                  "file");
    std::vector<std::string> names;
    for (const auto& program : programs) {
        auto name = json_as<std::string>(program, "attributes.system.ebpf.programs[]");
        if (!name)
            return name.error();
        if (std::find(std::begin(kPrograms), std::end(kPrograms), *name) == std::end(kPrograms))
            return make_error(EINVAL, fmt::format("attributes.system.ebpf.programs: no program \"{}\" (cpu, futex, "
                                                  "tcp, shm, file)",
                                                  *name));
        if (std::find(names.begin(), names.end(), *name) != names.end())
            return make_error(EINVAL, fmt::format("attributes.system.ebpf.programs: \"{}\" twice", *name));
        names.push_back(*name);
    }
    auto interval = json_field<double>(ebpf, "interval", 10, "attributes.system.ebpf");
    auto optional = json_field<bool>(ebpf, "optional", false, "attributes.system.ebpf");
    if (auto e = first_error(interval, optional))
        return *e;
    if (!(*interval >= 1 && *interval <= 3600))
        return make_error(EINVAL, fmt::format("attributes.system.ebpf.interval: {} is not 1 to 3600 seconds",
                                              *interval));
    return std::make_shared<const nlohmann::json>(
        nlohmann::json{{"programs", names}, {"interval", *interval}, {"optional", *optional}});
}

Result<ProfilingPolicy> ProfilingPolicy::from_config(const Config& config) {
    ProfilingPolicy policy;
    auto enabled = config.get_bool("profiling.enable", true);
    auto users = config.get_string_array("profiling.users", std::vector<std::string>{});
    auto queues = config.get_string_array("profiling.queues", std::vector<std::string>{});
    auto imp = config.get_string("exec.imp", "");
    if (auto e = first_error(enabled, users, queues, imp))
        return *e;
    policy.enabled = *enabled;
    // Names become uids now: the loop asks no password database at submit.
    for (const auto& user : *users) {
        char* end = nullptr;
        unsigned long uid = std::strtoul(user.c_str(), &end, 10);
        if (!user.empty() && *end == '\0') {
            policy.users.push_back(static_cast<uint32_t>(uid));
        } else if (const passwd* pw = getpwnam(user.c_str())) {
            policy.users.push_back(pw->pw_uid);
        } else {
            return make_error(EINVAL, fmt::format("profiling.users: no user is named \"{}\"", user));
        }
    }
    policy.queues = std::move(*queues);
#ifndef BANYAN_HAVE_PROFILER
    policy.cannot = "this Banyan was built without eBPF profiling (no clang, bpftool or libbpf)";
#else
    if (geteuid() != 0 && imp->empty())
        policy.cannot = fmt::format("eBPF profiling needs root: this instance runs as uid {}, without exec.imp",
                                    geteuid());
#endif
    return policy;
}

std::string ProfilingPolicy::refused(const nlohmann::json& ebpf, uint32_t userid, const std::string& queue) const {
    bool optional = json_field<bool>(ebpf, "optional", false, "ebpf").value_or(false);
    if (!enabled)
        return "eBPF profiling is off on this instance (banyan.toml: profiling.enable)";
    if (!users.empty() && std::find(users.begin(), users.end(), userid) == users.end())
        return fmt::format("uid {} may not profile jobs (banyan.toml: profiling.users)", userid);
    if (!queues.empty() && std::find(queues.begin(), queues.end(), queue) == queues.end())
        return fmt::format("jobs in queue '{}' may not be profiled (banyan.toml: profiling.queues)", queue);
    if (!cannot.empty() && !optional)
        return cannot + " (--profile-ebpf=...:optional runs the job unprofiled)";
    return "";
}

nlohmann::json ProfileTotals::to_json() const {
    return {{"oncpu", oncpu},           {"runq", runq},
            {"futex_wait", futex_wait}, {"file_time", file_time},
            {"tcp_sent", tcp_sent},     {"tcp_received", tcp_received},
            {"file_read", file_read},   {"file_written", file_written}};
}

ProfileTotals ProfileTotals::of(const nlohmann::json& node) {
    ProfileTotals t;
    for (const auto& [name, r] : json_object_at(node, {"ranks"}).items()) {
        const auto& cpu = json_object_at(r, {"cpu"});
        const auto& futex = json_object_at(r, {"futex"});
        t.oncpu += seconds_at(cpu, "oncpu");
        t.runq += seconds_at(cpu, "runq");
        t.futex_wait += seconds_at(futex, "wait");
    }
    const auto& sums = json_object_at(node, {"totals"});
    t.tcp_sent = count_at(sums, "tcp_sent");
    t.tcp_received = count_at(sums, "tcp_received");
    t.file_read = count_at(sums, "file_read_bytes");
    t.file_written = count_at(sums, "file_write_bytes");
    t.file_time = seconds_at(sums, "file_time");
    return t;
}

void ProfileTotals::add(const ProfileTotals& o, int sign) {
    oncpu += sign * o.oncpu, runq += sign * o.runq, futex_wait += sign * o.futex_wait, file_time += sign * o.file_time;
    auto step = [sign](uint64_t& a, uint64_t b) { a = sign > 0 ? a + b : a - std::min(a, b); };
    step(tcp_sent, o.tcp_sent), step(tcp_received, o.tcp_received);
    step(file_read, o.file_read), step(file_written, o.file_written);
}

ProfileTotals JobProfiles::Live::totals() const {
    return sum;
}

void JobProfiles::add(JobId id, double interval, uint32_t rank, double time, nlohmann::json data, bool final) {
    Live& live = live_[id];
    live.interval = interval;
    // The job's sum changes by what this rank's did: O(1) a sample, whatever
    // the number of nodes.
    ProfileTotals now = ProfileTotals::of(data);
    if (auto before = live.rank_totals.find(rank); before != live.rank_totals.end())
        live.sum.add(before->second, -1);
    live.sum.add(now, +1);
    live.rank_totals[rank] = now;
    live.ranks[rank] = std::move(data);
    if (final)
        live.final_ranks.insert(rank);
    // One point per interval: the ranks' samples of one interval (each
    // node's timer runs from its own start) update it.
    ProfileTotals totals = live.sum;
    double slot = std::floor(time / interval) * interval;
    if (!live.series.empty() && std::floor(live.series.back().first / interval) * interval == slot)
        live.series.back() = {std::max(time, live.series.back().first), totals};
    else
        live.series.emplace_back(time, totals);
    if (live.series.size() > kMaxSeries)
        live.series.pop_front();
}

const JobProfiles::Live* JobProfiles::find(JobId id) const {
    auto it = live_.find(id);
    return it == live_.end() ? nullptr : &it->second;
}

nlohmann::json JobProfiles::series_json(const Live& live) {
    nlohmann::json series = nlohmann::json::array();
    for (const auto& [time, totals] : live.series)
        series.push_back({time, totals.to_json()});
    return series;
}

}  // namespace banyan
