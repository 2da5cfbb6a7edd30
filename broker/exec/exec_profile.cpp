// The exec service's part of the eBPF job profiles (doc/spec/profiling.md
// §5): the profiler counts a job from its shell's start, its counters go
// to rank 0 every interval and, complete, before exec.run is answered.
#include <cstdlib>

#include <unistd.h>

#include <fmt/format.h>

#include "broker/exec/exec_service.hpp"
#include "broker/exec/local_job.hpp"
#include "core/duration.hpp"
#include "core/json_field.hpp"
#include "core/log.hpp"
#include "core/programs.hpp"

namespace banyan {

namespace {
constexpr auto kProfilerPatience = std::chrono::seconds(5);
constexpr auto kProfilerTrackPatience = std::chrono::seconds(30);

std::chrono::milliseconds interval_of(const EbpfRequest& ebpf) {
    return std::chrono::milliseconds(static_cast<int64_t>(ebpf.interval * 1000));
}
}  // namespace

Result<EbpfRequest> ExecService::read_ebpf_request(const nlohmann::json& ebpf) {
    EbpfRequest request;
    for (const auto& name : json_array_at(ebpf, "programs")) {
        auto text = json_as<std::string>(name, "exec.run.ebpf.programs[]");
        if (!text)
            return text.error();
        request.programs.push_back(*text);
    }
    auto interval = json_field<double>(ebpf, "interval", 10, "exec.run.ebpf");
    auto optional = json_field<bool>(ebpf, "optional", false, "exec.run.ebpf");
    if (auto e = first_error(interval, optional))
        return *e;
    if (request.programs.empty() || !(*interval >= 1 && *interval <= 3600))
        return make_error(EPROTO, "exec.run.ebpf: expected programs and an interval of 1 to 3600 seconds");
    request.interval = *interval;
    request.optional = *optional;
    return request;
}

Result<std::vector<std::string>> ExecService::profiler_argv() const {
#ifndef BANYAN_HAVE_PROFILER
    return make_error(ENOTSUP, "this Banyan was built without eBPF profiling (no clang, bpftool or libbpf)");
#else
    if (geteuid() == 0)
        return std::vector<std::string>{program_path("banyan-profiler")};
    if (imp_path_)
        return std::vector<std::string>{*imp_path_, "profiler"};
    return make_error(EPERM, fmt::format("eBPF profiling needs root: this broker runs as uid {}, without exec.imp",
                                         getuid()));
#endif
}

void ExecService::start_profiling(JobId id, LocalJob& job) {
    uint32_t rank = broker_.bootstrap().rank;
    auto refuse = [this, rank](LocalJob& j, const std::string& why) {
        to_shell(j, {{"type", "ebpf"},
                     {"error", fmt::format("eBPF profiling on rank {}: {}", rank, why)},
                     {"optional", j.ebpf->optional}});
    };
    auto argv = profiler_argv();
    if (!argv)
        return refuse(job, argv.error().message);
    if (!profiler_ || !profiler_->usable()) {
        if (profiler_)
            retired_profilers_.push_back(std::move(profiler_));  // (it exits at the end of its stdin)
        profiler_ = std::make_unique<ProfilerLink>(broker_.reactor(), *argv);
    }
    nlohmann::json request{{"op", "track"},
                           {"job", id},
                           {"pid", job.shell->pid()},
                           {"uid", job.userid},
                           {"programs", job.ebpf->programs}};
    // A profiler that does not answer (loading, stuck) holds no job: after
    // kProfilerTrackPatience the shell hears why, and the next job starts
    // another profiler.
    auto answered = std::make_shared<bool>(false);
    job.ebpf_timer = std::make_unique<Timer>(broker_.reactor());
    job.ebpf_timer->start(kProfilerTrackPatience, [this, id, answered, refuse] {
        if (std::exchange(*answered, true))
            return;
        if (profiler_)
            profiler_->give_up("no answer to track within 30 s");
        if (auto it = jobs_.find(id); it != jobs_.end())
            refuse(*it->second, "banyan-profiler did not answer within 30 s");
    });
    profiler_->ask(std::move(request), [this, id, launch = job.launch, refuse,
                                        answered](Result<nlohmann::json> tracked) {
        if (std::exchange(*answered, true))
            return;  // (given up already)
        auto it = jobs_.find(id);
        if (it == jobs_.end() || it->second->launch != launch || it->second->phase == LocalJob::Phase::ending) {
            // Ended meanwhile: nothing of it stays in the maps.
            if (tracked && profiler_)
                profiler_->ask({{"op", "untrack"}, {"job", id}}, [](Result<nlohmann::json>) {});
            return;
        }
        LocalJob& counted = *it->second;
        if (!tracked)
            return refuse(counted, tracked.error().message);
        counted.ebpf_tracked = true;
        counted.ebpf_timer.reset();
        to_shell(counted, {{"type", "ebpf"}, {"ok", true}});
        counted.ebpf_next_sample = std::chrono::steady_clock::now() + interval_of(*counted.ebpf);
        if (!profile_tick_) {
            profile_tick_ = std::make_unique<Timer>(broker_.reactor());
            profile_tick_->start_repeating(std::chrono::seconds(1), [this] { sample_profiles(); });
        }
    });
}

void ExecService::sample_profiles() {
    if (!profiler_ || profile_reading_)
        return;  // (one read at a time: a slow profiler is not asked again meanwhile)
    auto now = std::chrono::steady_clock::now();
    nlohmann::json due = nlohmann::json::array();
    for (auto& [id, job] : jobs_)
        if (job->ebpf_tracked && job->ebpf_next_sample <= now) {
            due.push_back(id);
            job->ebpf_next_sample = now + interval_of(*job->ebpf);
        }
    if (due.empty())
        return;
    // One read for all of them: the profiler walks its maps once. (A
    // sample keeps the 8 busiest of each list: rank 0 hears from every
    // node each interval. The last counters have them all.)
    profile_reading_ = true;
    profiler_->ask({{"op", "read"}, {"job", 0}, {"jobs", std::move(due)}, {"top", 8}},
                   [this](Result<nlohmann::json> data) {
                       profile_reading_ = false;
                       if (!data)
                           return log::warning("exec", "profiles: {}", data.error().message);
                       for (auto& [key, counters] : data->items()) {
                           auto it = jobs_.find(std::strtoull(key.c_str(), nullptr, 10));
                           if (it == jobs_.end() || !it->second->ebpf_tracked || !counters.is_object())
                               continue;
                           send_to_job_manager(it->first, *it->second,
                                               {"job-manager.profile",
                                                {{"id", it->first},
                                                 {"rank", broker_.bootstrap().rank},
                                                 {"time", wall_now()},
                                                 {"data", std::move(counters)}}});
                       }
                   });
}

void ExecService::end_profiling(JobId id, LocalJob& job, std::function<void()> then) {
    job.ebpf_tracked = false;
    if (!profiler_)
        return then();
    // A profiler that does not answer (stopped, hung) holds no job's end:
    // after kProfilerPatience it goes on without the last counters.
    auto pending = std::make_shared<std::function<void()>>(std::move(then));
    job.ebpf_timer = std::make_unique<Timer>(broker_.reactor());
    job.ebpf_timer->start(kProfilerPatience, [id, pending] {
        log::warning("exec", "{}: banyan-profiler did not answer: its last profile is lost", format_jobid(id));
        if (auto fn = std::exchange(*pending, nullptr))
            fn();
    });
    profiler_->ask({{"op", "untrack"}, {"job", id}},
                   [this, id, launch = job.launch, pending](Result<nlohmann::json> data) {
                       auto it = jobs_.find(id);
                       if (it == jobs_.end() || it->second->launch != launch || !*pending)
                           return;
                       it->second->ebpf_timer.reset();
                       if (data)
                           send_to_job_manager(id, *it->second,
                                               {"job-manager.profile",
                                                {{"id", id},
                                                 {"rank", broker_.bootstrap().rank},
                                                 {"time", wall_now()},
                                                 {"data", *data},
                                                 {"final", true}}});
                       else
                           log::warning("exec", "{}: its last profile is lost: {}", format_jobid(id),
                                        data.error().message);
                       std::exchange(*pending, nullptr)();
                   });
}

}  // namespace banyan
