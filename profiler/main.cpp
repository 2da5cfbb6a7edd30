// banyan-profiler: the node's eBPF job profiles (doc/spec/profiling.md).
// Started by the exec service at the node's first profiled job, as root:
// directly by a broker that runs as root, otherwise through `banyan-imp
// profiler`. Its stdin and stdout are the exec service's: JSON lines, one
// request and one answer each, in order. It holds the loaded programs for
// as long as its stdin stays open; when the broker goes, it goes, and the
// kernel detaches everything with it.
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <set>
#include <string>

#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include "core/json_field.hpp"
#include "core/json_parse.hpp"
#include "profiler/bpf_profiles.hpp"

using namespace banyan;

namespace {

// Programs stay attached this long after their last job: a job's end
// never waits for the detach (BpfProfiles::detach_idle).
constexpr auto kDetachAfter = std::chrono::seconds(30);

void answer(const nlohmann::json& message) {
    std::cout << message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n' << std::flush;
}

// The parent of `pid` (/proc/PID/stat's fourth field); 0 when it is gone.
pid_t parent_of(pid_t pid) {
    std::ifstream stat(fmt::format("/proc/{}/stat", pid));
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    size_t close = text.rfind(')');
    if (close == std::string::npos)
        return 0;
    char state = 0;
    int ppid = 0;
    if (std::sscanf(text.c_str() + close + 1, " %c %d", &state, &ppid) != 2)
        return 0;
    return ppid;
}

Result<nlohmann::json> serve(BpfProfiles& profiles, const nlohmann::json& request, const std::string& op,
                             uint64_t job) {
    if (op == "track") {
        auto pid = json_field<int64_t>(request, "pid", 0, "track");
        auto uid = json_field<uint32_t>(request, "uid", 0, "track");
        if (auto e = first_error(pid, uid))
            return *e;
        unsigned programs = 0;
        for (const auto& name : json_array_at(request, "programs")) {
            auto text = json_as<std::string>(name, "track.programs[]");
            if (!text)
                return text.error();
            size_t g = 0;
            while (g < kProfilePrograms.size() && *text != kProfilePrograms[g])
                g++;
            if (g == kProfilePrograms.size())
                return make_error(EINVAL, fmt::format("no profile program is named {}", *text));
            programs |= 1u << g;
        }
        if (programs == 0)
            return make_error(EINVAL, "track: no program named");
        // Only a shell of the broker that started this profiler: the
        // broker's own child (its fork server's shells are too, by
        // CLONE_PARENT). Nothing else on the node may be watched through it.
        if (*pid <= 0 || parent_of(static_cast<pid_t>(*pid)) != getppid())
            return make_error(EPERM, fmt::format("pid {} is not a job shell of this broker", *pid));
        if (auto tracked = profiles.track(job, static_cast<pid_t>(*pid), programs, *uid); !tracked)
            return tracked.error();
        return nlohmann::json::object();
    }
    if (op == "tasks") {
        std::vector<std::pair<pid_t, uint32_t>> tasks;
        for (const auto& pair : json_array_at(request, "tasks")) {
            auto pid = json_as<int64_t>(pair.is_array() && pair.size() == 2 ? pair[0] : nlohmann::json(), "tasks[][0]");
            auto rank = json_as<uint32_t>(pair.is_array() && pair.size() == 2 ? pair[1] : nlohmann::json(), "tasks[][1]");
            if (!pid || !rank || *pid <= 0)
                return make_error(EINVAL, "tasks: each is [pid, rank]");
            tasks.emplace_back(static_cast<pid_t>(*pid), *rank);
        }
        profiles.name_tasks(job, tasks);
        return nlohmann::json::object();
    }
    if (op == "read" && request.contains("jobs")) {  // several: {ID: counters} of those profiled here
        std::set<uint64_t> jobs;
        for (const auto& id : json_array_at(request, "jobs")) {
            auto n = json_as<uint64_t>(id, "read.jobs[]");
            if (!n)
                return n.error();
            jobs.insert(*n);
        }
        auto top = json_field<uint64_t>(request, "top", UINT64_MAX, "read");
        if (!top)
            return top.error();
        nlohmann::json all = nlohmann::json::object();
        for (auto& [id, data] : profiles.read(jobs, *top))
            all[std::to_string(id)] = std::move(data);
        return all;
    }
    if (op == "read" || op == "untrack") {
        if (!profiles.tracking(job))
            return make_error(ENOENT, fmt::format("job {} is not profiled here", job));
        auto top = json_field<uint64_t>(request, "top", UINT64_MAX, "read");
        if (!top)
            return top.error();
        return op == "read" ? profiles.read({job}, *top)[job] : profiles.untrack(job);
    }
    return make_error(EINVAL, fmt::format("no request is named {}", op));
}

}  // namespace

int main(int argc, char**) {
    if (argc != 1) {
        std::fprintf(stderr, "usage: banyan-profiler (started by banyan-broker; see doc/spec/profiling.md)\n");
        return 2;
    }
    std::signal(SIGPIPE, SIG_IGN);
    auto loaded = BpfProfiles::load();
    if (!loaded) {
        answer({{"error", loaded.error().message}});
        return 1;
    }
    BpfProfiles& profiles = **loaded;
    nlohmann::json refused = nlohmann::json::object();
    for (size_t g = 0; g < kProfilePrograms.size(); g++)
        if (!profiles.refused(g).empty())
            refused[kProfilePrograms[g]] = profiles.refused(g);
    answer({{"ready", true}, {"refused", refused}});
    // Lines from stdin; between them, every second, programs no job has
    // used for kDetachAfter are detached.
    std::string buffer;
    auto next_line = [&](std::string& line) {
        for (;;) {
            if (size_t nl = buffer.find('\n'); nl != std::string::npos) {
                line = buffer.substr(0, nl);
                buffer.erase(0, nl + 1);
                return true;
            }
            pollfd in{.fd = 0, .events = POLLIN, .revents = 0};
            int ready = poll(&in, 1, 1000);
            if (ready < 0 && errno != EINTR)
                return false;
            profiles.detach_idle(kDetachAfter);
            if (ready <= 0)
                continue;
            char chunk[65536];
            ssize_t n = read(0, chunk, sizeof chunk);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                return false;  // the broker is gone
            buffer.append(chunk, static_cast<size_t>(n));
        }
    };
    std::string line;
    while (next_line(line)) {
        auto request = parse_json(line);
        if (!request || !request->is_object()) {
            answer({{"error", "a request is one JSON object on a line"}});
            continue;
        }
        auto op = json_field<std::string>(*request, "op", "", "request");
        auto job = json_field<uint64_t>(*request, "job", 0, "request");
        if (!op || !job) {
            answer({{"error", (!op ? op.error() : job.error()).message}});
            continue;
        }
        auto result = serve(profiles, *request, *op, *job);
        if (result)
            answer({{"op", *op}, {"job", *job}, {"data", *result}});
        else
            answer({{"op", *op}, {"job", *job}, {"error", result.error().message}});
    }
    return 0;
}
