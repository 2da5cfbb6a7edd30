// /metrics (doc/spec/http.md §5): the services' own numbers, asked for at
// each scrape, in the Prometheus text format; and the history ring the
// dashboard plots.
#include <dirent.h>
#include <unistd.h>

#include <fstream>

#include <fmt/format.h>

#include "broker/http/http_service.hpp"
#include "core/duration.hpp"
#include "core/histogram.hpp"
#include "core/idset.hpp"
#include "core/json_field.hpp"
#include "core/log.hpp"

namespace banyan {
namespace {

// A label value, escaped as the text format wants (\\, \", \n).
std::string label(std::string_view value) {
    std::string out;
    for (char c : value) {
        if (c == '\\' || c == '"')
            out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out;
}

uint64_t number(const nlohmann::json& j, std::string_view key) {
    return json_field<uint64_t>(j, key, 0, "").value_or(0);
}

void family(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
    out += fmt::format("# HELP banyan_{} {}\n# TYPE banyan_{} {}\n", name, help, name, type);
}

void histogram(std::string& out, std::string_view name, std::string_view help, const nlohmann::json& h) {
    family(out, name, "histogram", help);
    const auto& buckets = h.is_object() && h.contains("buckets") ? h["buckets"] : nlohmann::json::array();
    for (size_t i = 0; i < Histogram::kBounds.size() + 1; i++) {
        uint64_t v = i < buckets.size() && buckets[i].is_number_unsigned() ? buckets[i].get<uint64_t>() : 0;
        std::string le = i < Histogram::kBounds.size() ? fmt::format("{}", Histogram::kBounds[i]) : "+Inf";
        out += fmt::format("banyan_{}_bucket{{le=\"{}\"}} {}\n", name, le, v);
    }
    out += fmt::format("banyan_{}_sum {}\nbanyan_{}_count {}\n", name,
                       json_field<double>(h, "sum", 0.0, "").value_or(0.0), name, number(h, "count"));
}

uint64_t resident_bytes() {
    std::ifstream statm("/proc/self/statm");
    uint64_t size = 0, resident = 0;
    statm >> size >> resident;
    return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

uint64_t open_fds() {
    uint64_t n = 0;
    if (DIR* d = opendir("/proc/self/fd")) {
        while (readdir(d))
            n++;
        closedir(d);
    }
    return n >= 3 ? n - 3 : 0;  // ".", ".." and the directory's own fd
}

// What the scrape gathers, filled as the services answer.
struct Scrape {
    nlohmann::json jobs, sched, nodes, overlay, accounting;
    int waiting = 5;
    std::string failed;
    int status = 503;
};

std::string render(const Scrape& s, const std::map<int, uint64_t>& answered) {
    std::string out;
    family(out, "jobs", "gauge", "Jobs by state.");
    for (const auto& [state, n] : json_object_at(s.jobs, {"states"}).items())
        out += fmt::format("banyan_jobs{{state=\"{}\"}} {}\n", label(state), n.is_number() ? n.get<uint64_t>() : 0);
    family(out, "jobs_queue", "gauge", "Active jobs by named queue: pending or running.");
    for (const auto& [queue, c] : json_object_at(s.jobs, {"queues"}).items())
        for (const char* state : {"pending", "running"})
            out += fmt::format("banyan_jobs_queue{{queue=\"{}\",state=\"{}\"}} {}\n", label(queue), state,
                               number(c, state));
    family(out, "jobs_submitted_total", "counter", "Jobs submitted since rank 0 started.");
    out += fmt::format("banyan_jobs_submitted_total {}\n", number(s.jobs, "submitted"));
    family(out, "jobs_started_total", "counter", "Jobs started since rank 0 started.");
    out += fmt::format("banyan_jobs_started_total {}\n", number(s.jobs, "started"));
    family(out, "jobs_completed_total", "counter", "Jobs that became inactive since rank 0 started.");
    out += fmt::format("banyan_jobs_completed_total {}\n", number(s.jobs, "completed"));
    family(out, "jobs_inactive_total", "counter", "Jobs that became inactive since rank 0 started, by result.");
    for (const auto& [result, n] : json_object_at(s.jobs, {"results"}).items())
        out += fmt::format("banyan_jobs_inactive_total{{result=\"{}\"}} {}\n", label(result.empty() ? "none" : result),
                           n.is_number() ? n.get<uint64_t>() : 0);
    // Running profiled jobs (--profile-ebpf, doc/spec/profiling.md §6).
    const auto& profiles = json_object_at(s.jobs, {"profiles"});
    struct ProfileSeries {
        const char* name;
        const char* help;
        const char* key;
        const char* direction;  // a label, or none
    };
    const ProfileSeries series[] = {
        {"job_profile_cpu_seconds_total", "On-CPU time of a profiled job's tasks.", "oncpu", nullptr},
        {"job_profile_runq_seconds_total", "Time a profiled job's tasks waited for a CPU.", "runq", nullptr},
        {"job_profile_futex_wait_seconds_total", "Time a profiled job's tasks waited in futexes.", "futex_wait",
         nullptr},
        {"job_profile_file_seconds_total", "Time a profiled job's tasks spent in file reads and writes.", "file_time",
         nullptr},
        {"job_profile_tcp_bytes_total", "TCP bytes a profiled job's tasks sent and received.", "tcp_sent", "sent"},
        {"job_profile_tcp_bytes_total", nullptr, "tcp_received", "received"},
        {"job_profile_file_bytes_total", "File bytes a profiled job's tasks read and wrote.", "file_read", "read"},
        {"job_profile_file_bytes_total", nullptr, "file_written", "written"},
    };
    for (const auto& f : series) {
        if (f.help)
            family(out, f.name, "counter", f.help);
        for (const auto& [job, totals] : profiles.items()) {
            double value = json_field<double>(totals, f.key, 0, "").value_or(0);
            out += f.direction ? fmt::format("banyan_{}{{job=\"{}\",direction=\"{}\"}} {}\n", f.name, label(job),
                                             f.direction, value)
                               : fmt::format("banyan_{}{{job=\"{}\"}} {}\n", f.name, label(job), value);
        }
    }
    const auto& demand = json_object_at(s.jobs, {"demand"});
    for (const char* what : {"nodes", "cores", "gpus"}) {
        std::string name = fmt::format("pending_demand_{}", what);
        family(out, name, "gauge", fmt::format("The {} pending jobs ask for in all.", what));
        out += fmt::format("banyan_{} {}\n", name, number(demand, what));
    }
    std::map<std::string, uint64_t> node_states;
    uint64_t cores[3] = {}, gpus[3] = {};  // free, allocated, down
    for (const auto& n : s.nodes.contains("nodes") ? s.nodes["nodes"] : nlohmann::json::array()) {
        std::string state = json_field<std::string>(n, "state", "unknown", "").value_or("unknown");
        node_states[state]++;
        uint64_t c = number(n, "cores"), cu = number(n, "cores_used"), g = number(n, "gpus"),
                 gu = number(n, "gpus_used");
        bool avail = state == "avail";
        cores[1] += cu;
        gpus[1] += gu;
        (avail ? cores[0] : cores[2]) += c > cu ? c - cu : 0;
        (avail ? gpus[0] : gpus[2]) += g > gu ? g - gu : 0;
    }
    family(out, "nodes", "gauge", "Nodes by state.");
    for (const auto& [state, n] : node_states)
        out += fmt::format("banyan_nodes{{state=\"{}\"}} {}\n", label(state), n);
    const char* kinds[3] = {"free", "allocated", "down"};
    family(out, "cores", "gauge", "Cores: free, allocated, or down (on a node that takes no jobs).");
    for (int i = 0; i < 3; i++)
        out += fmt::format("banyan_cores{{state=\"{}\"}} {}\n", kinds[i], cores[i]);
    family(out, "gpus", "gauge", "GPUs: free, allocated, or down.");
    for (int i = 0; i < 3; i++)
        out += fmt::format("banyan_gpus{{state=\"{}\"}} {}\n", kinds[i], gpus[i]);
    histogram(out, "sched_pass_seconds", "The duration of a scheduling pass.", json_object_at(s.sched, {"pass"}));
    histogram(out, "job_commit_seconds", "A batch of job-database writes, from its first write to its commit.",
              json_object_at(s.jobs, {"commit"}));
    family(out, "overlay_ranks", "gauge", "Broker ranks by state, as rank 0 sees them.");
    uint64_t size = number(s.overlay, "size");
    std::map<std::string, uint64_t> ranks;
    uint64_t counted = 0;
    for (const char* state : {"online", "torpid", "lost", "offline"}) {
        auto text = json_field<std::string>(s.overlay, state, "", "").value_or("");
        auto ids = IdSet::parse(text);
        uint64_t n = ids ? ids->count() : 0;
        out += fmt::format("banyan_overlay_ranks{{state=\"{}\"}} {}\n", state, n);
        counted += n;
    }
    if (size > counted)
        out += fmt::format("banyan_overlay_ranks{{state=\"unknown\"}} {}\n", size - counted);
    family(out, "rank0_resident_bytes", "gauge", "Rank 0's resident memory.");
    out += fmt::format("banyan_rank0_resident_bytes {}\n", resident_bytes());
    family(out, "rank0_open_fds", "gauge", "Rank 0's open file descriptors.");
    out += fmt::format("banyan_rank0_open_fds {}\n", open_fds());
    // By bank: what jobs recorded since rank 0 started used ("none": no bank).
    const auto& banks = json_object_at(s.accounting, {"banks"});
    for (auto [name, key, help] :
         {std::tuple{"bank_core_seconds_total", "core_seconds", "Core-seconds of the jobs recorded, by bank."},
          std::tuple{"bank_gpu_seconds_total", "gpu_seconds", "GPU-seconds of the jobs recorded, by bank."},
          std::tuple{"bank_jobs_total", "jobs", "Jobs recorded, by bank."}}) {
        family(out, name, "counter", help);
        for (const auto& [bank, u] : banks.items())
            out += fmt::format("banyan_{}{{bank=\"{}\"}} {}\n", name, label(bank.empty() ? "none" : bank),
                               json_field<double>(u, key, 0.0, "").value_or(0.0));
    }
    family(out, "http_requests_total", "counter", "HTTP requests answered, by status.");
    for (const auto& [code, n] : answered)
        out += fmt::format("banyan_http_requests_total{{code=\"{}\"}} {}\n", code, n);
    return out;
}

}  // namespace

void HttpService::metrics(const HttpCall& call) {
    auto scrape = std::make_shared<Scrape>();
    auto exchange = call.exchange;
    // A token's user asks as that user (the stats are the owner's); an
    // open /metrics, configured so by the owner, as the owner.
    uint32_t uid = call.anonymous ? getuid() : call.uid;
    uint32_t rolemask = call.anonymous ? role::owner : call.rolemask;
    auto ask_for = [&](const char* topic, nlohmann::json Scrape::*field) {
        broker_.rpc_as(uid, rolemask, Message::request(topic, nlohmann::json::object(), 0),
                       [this, scrape, exchange, field, topic](const Message& answer) {
                           auto payload = answer.errnum == 0 ? answer.json() : Result<nlohmann::json>(Error{});
                           if (payload)
                               (*scrape).*field = std::move(*payload);
                           else if (scrape->failed.empty()) {
                               scrape->failed = fmt::format("{}: {}", topic, answer.error_text());
                               scrape->status = http_status_of(static_cast<int>(answer.errnum));
                           }
                           if (--scrape->waiting > 0 || exchange->closed())
                               return;
                           if (!scrape->failed.empty())
                               return respond_error(*exchange, scrape->status, scrape->failed);
                           exchange->respond(
                               200, "text/plain; version=0.0.4; charset=utf-8",
                               render(*scrape, server_ ? server_->answered() : std::map<int, uint64_t>{}));
                       });
    };
    ask_for("job-manager.stats", &Scrape::jobs);
    ask_for("sched.stats", &Scrape::sched);
    ask_for("resource.nodes", &Scrape::nodes);
    ask_for("overlay.status", &Scrape::overlay);
    ask_for("accounting.stats", &Scrape::accounting);
}

// Every 10 s: the queue's depth and what completed since, kept an hour.
void HttpService::sample_history() {
    broker_.rpc(Message::request("job-manager.stats", nlohmann::json::object(), 0), [this](const Message& answer) {
        auto payload = answer.errnum == 0 ? answer.json() : Result<nlohmann::json>(Error{});
        if (!payload)
            return;
        const auto& states = json_object_at(*payload, {"states"});
        uint64_t pending = number(states, "depend") + number(states, "priority") + number(states, "sched");
        uint64_t running = number(states, "run") + number(states, "cleanup");
        uint64_t completed = number(*payload, "completed");
        uint64_t since = history_started_ && completed >= last_completed_ ? completed - last_completed_ : 0;
        history_started_ = true;
        last_completed_ = completed;
        history_.push_back({wall_now(), pending, running, since});
        while (history_.size() > 360)
            history_.pop_front();
    });
}

}  // namespace banyan
