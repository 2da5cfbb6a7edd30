#include "broker/job_manager/job.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <ctime>

#include <fmt/format.h>

#include "broker/job_manager/job_profiles.hpp"
#include "core/duration.hpp"
#include "core/json_field.hpp"
#include "core/json_parse.hpp"
#include "resource/rv1.hpp"
#include "sched/shell_options.hpp"

namespace banyan {
namespace {

constexpr std::array<std::string_view, 6> kStateNames = {"depend", "priority", "sched", "run", "cleanup", "inactive"};

// A count: a number, or a range's min ({"min": N, ...}).
uint64_t count_of(const nlohmann::json& c) {
    if (c.is_number_integer())
        return c.get<int64_t>() > 0 ? c.get<uint64_t>() : 0;
    if (c.is_object() && c.contains("min") && c["min"].is_number_integer())
        return c["min"].get<int64_t>() > 0 ? c["min"].get<uint64_t>() : 0;
    return 1;
}

// Tasks the jobspec asks for: a total, or per_slot times the slots.
uint32_t count_tasks(const nlohmann::json& jobspec) {
    const auto& tasks = json_array_at(jobspec, "tasks");
    if (tasks.empty() || !tasks[0].is_object() || !tasks[0].contains("count"))
        return 1;
    const auto& count = tasks[0]["count"];
    if (count.contains("total"))
        return static_cast<uint32_t>(count_of(count["total"]));
    uint64_t per_slot = count.contains("per_slot") ? count_of(count["per_slot"]) : 1;
    // Slots: the product of counts down the resource tree to the slot.
    uint64_t slots = 1;
    auto resources = jobspec.find("resources");
    const nlohmann::json* level = resources == jobspec.end() ? nullptr : &*resources;
    while (level && level->is_array() && !level->empty()) {
        const auto& r = (*level)[0];
        slots *= r.contains("count") ? count_of(r["count"]) : 1;
        if (json_field<std::string>(r, "type", "").value_or("") == "slot")
            break;
        auto with = r.find("with");
        level = with == r.end() ? nullptr : &*with;
    }
    return static_cast<uint32_t>(per_slot * slots);
}

// How many resources of `type` a resource list asks for in all: each
// one's count times those of the levels above it (minimums of ranges).
uint64_t count_resources(const nlohmann::json& level, std::string_view type, uint64_t above = 1) {
    uint64_t total = 0;
    if (!level.is_array())
        return 0;
    for (const auto& r : level) {
        if (!r.is_object())
            continue;
        uint64_t here = above * (r.contains("count") ? count_of(r["count"]) : 1);
        if (r.contains("type") && r["type"] == type)
            total += here;
        else if (r.contains("with"))
            total += count_resources(r["with"], type, here);
    }
    return total;
}

uint32_t count_nodes(const nlohmann::json& jobspec) {
    const auto& res = json_array_at(jobspec, "resources");
    if (res.empty() || json_field<std::string>(res[0], "type", "").value_or("") != "node")
        return 0;
    return static_cast<uint32_t>(res[0].contains("count") ? count_of(res[0]["count"]) : 1);
}

}  // namespace

std::chrono::milliseconds delay_until(double when) {
    constexpr double kCenturyMs = 100.0 * 365 * 86400 * 1000;
    return std::chrono::milliseconds(
        static_cast<int64_t>(std::ceil(std::clamp((when - wall_now()) * 1000, 0.0, kCenturyMs))));
}

std::string_view state_name(JobState state) {
    return kStateNames[static_cast<size_t>(state)];
}

Result<JobState> state_from_name(std::string_view name) {
    for (size_t i = 0; i < kStateNames.size(); i++)
        if (kStateNames[i] == name)
            return static_cast<JobState>(i);
    return make_error(EINVAL, fmt::format("{}: not a job state (expected depend, priority, sched, run, "
                                          "cleanup or inactive)",
                                          name));
}

nlohmann::json JobEvent::to_json() const {
    return {{"timestamp", timestamp}, {"name", name}, {"context", context}};
}

Result<JobEvent> JobEvent::from_json(const nlohmann::json& j) {
    auto timestamp = json_field<double>(j, "timestamp", 0, "event");
    auto name = json_field<std::string>(j, "name", "", "event");
    auto context = json_field<nlohmann::json>(j, "context", nlohmann::json::object(), "event");
    if (auto e = first_error(timestamp, name, context))
        return *e;
    return JobEvent{*timestamp, *name, *context};
}

Result<std::optional<double>> read_reattach_timeout(const nlohmann::json& system) {
    if (!system.contains("reattach-timeout"))
        return std::optional<double>();
    auto wait = json_field<double>(system, "reattach-timeout", 0, "attributes.system");
    if (!wait || !std::isfinite(*wait) || *wait < 0)
        return make_error(EINVAL, "attributes.system.reattach-timeout: expected seconds, 0 or more");
    return std::optional<double>(*wait);
}

Result<void> Job::read_jobspec(const nlohmann::json& spec, const NamedQueues& queues) {
    const auto& system = json_object_at(spec, {"attributes", "system"});
    nlohmann::json for_sched{{"version", json_field<int64_t>(spec, "version", 1).value_or(1)},
                             {"resources", json_array_at(spec, "resources")},
                             {"tasks", json_array_at(spec, "tasks")}};
    // What the scheduler needs of attributes.system: the duration, the
    // constraints (validated at submit), the advance reservation, the
    // queue and the profile hint.
    for (const char* key : {"duration", "constraints", "reservation"})
        if (system.contains(key))
            for_sched["attributes"]["system"][key] = system[key];
    // Refused at submit (job_manager_submit.cpp); a job stored before a
    // type was refused reads back without mail, not as a broken job.
    mail = read_mail_request(system).value_or(nullptr);
    auto in_reservation = json_field<std::string>(system, "reservation", "", "attributes.system");
    if (!in_reservation)
        return in_reservation.error();
    reservation = *in_reservation;
    if (const auto& options = json_object_at(system, {"shell", "options"}); options.contains("profile"))
        for_sched["attributes"]["system"]["shell"]["options"]["profile"] = options["profile"];
    ntasks = count_tasks(spec);
    nnodes = count_nodes(spec);
    nnodes_asked = nnodes;
    if (const auto& r = spec.find("resources"); r != spec.end()) {
        ncores = count_resources(*r, "core");
        ngpus = count_resources(*r, "gpu");
    }
    if (system.contains("duration") && system["duration"].is_number())
        duration = system["duration"].get<double>();
    auto asked = json_field<std::string>(system, "queue", "", "attributes.system");
    if (!asked)
        return asked.error();
    auto q = queues.resolve(*asked);
    if (!q)
        return q.error();
    if (*q) {
        queue = (*q)->name;
        for_sched["attributes"]["system"]["queue"] = queue;
        if (duration <= 0 && (*q)->max_duration > 0) {
            duration = (*q)->max_duration;
            for_sched["attributes"]["system"]["duration"] = duration;
        }
    }
    sched_jobspec = for_sched.dump();
    const auto& job_attrs = json_object_at(system, {"job"});
    if (job_attrs.contains("name") && job_attrs["name"].is_string())
        name = job_attrs["name"].get<std::string>();
    else if (const auto& tasks = json_array_at(spec, "tasks"); !tasks.empty() &&
                                                               !json_array_at(tasks[0], "command").empty() &&
                                                               json_array_at(tasks[0], "command")[0].is_string()) {
        std::string arg0 = json_array_at(tasks[0], "command")[0].get<std::string>();
        name = arg0.substr(arg0.rfind('/') == std::string::npos ? 0 : arg0.rfind('/') + 1);
    }
    if (auto options = read_shell_options(system); options && options->signal) {
        warning_signal = options->signal->signum;
        warning_timeleft = options->signal->timeleft;
    }
    auto ebpf_asked = read_ebpf_request(system);
    if (!ebpf_asked)
        return ebpf_asked.error();
    ebpf = std::move(*ebpf_asked);
    auto requeue = json_field<bool>(system, "requeue", false, "attributes.system");
    if (!requeue)
        return requeue.error();
    requeue_on_node_failure = *requeue;
    // Refused at submit; a job stored before the key was read (any value
    // was kept) reads back without it, not as a broken job.
    reattach_timeout = read_reattach_timeout(system).value_or(std::nullopt);
    // An array's indexes, checked against the configured limits at submit
    // (a stored one is read whatever the limits are now).
    if (system.contains("array") && array_id == 0) {
        auto text = json_field<std::string>(system, "array", "", "attributes.system");
        if (!text)
            return text.error();
        auto parsed = JobArray::parse(*text, ArrayLimits{UINT64_MAX, IdSet::kMaxId});
        if (!parsed)
            return make_error(EINVAL, "attributes.system.array: " + parsed.error().message);
        array = std::make_shared<JobArray>(std::move(*parsed));
    }
    if (!system.contains("dependencies"))
        return {};
    const auto& deps = system["dependencies"];
    if (!deps.is_array())
        return make_error(EINVAL, "attributes.system.dependencies: expected an array of {scheme, value}");
    for (size_t i = 0; i < deps.size(); i++) {
        std::string where = fmt::format("attributes.system.dependencies[{}]", i);
        auto scheme = json_field<std::string>(deps[i], "scheme", "", where);
        if (!scheme)
            return scheme.error();
        auto value = json_field<std::string>(deps[i], "value", "", where);
        if (!value)
            return value.error();
        if (*scheme == "begin-time") {  // {"scheme": "begin-time", "value": "SECONDS SINCE THE EPOCH"}
            char* end = nullptr;
            double when = std::strtod(value->c_str(), &end);
            if (value->empty() || *end != '\0' || !std::isfinite(when) || when < 0)
                return make_error(EINVAL, fmt::format("{}.value: {}: expected seconds since the epoch", where, *value));
            begin_time = std::max(begin_time, when);
            continue;
        }
        if (*scheme == "singleton") {  // {"scheme": "singleton", "value": ""}: no target
            singleton = true;
            continue;
        }
        if (*scheme != "afterstart" && *scheme != "afterany" && *scheme != "afterok" && *scheme != "afternotok")
            return make_error(EINVAL, fmt::format("{}.scheme: {}: expected afterstart, afterany, afterok, afternotok, "
                                                  "singleton or begin-time",
                                                  where, *scheme));
        auto target = parse_job_ref(*value);
        if (!target)
            return make_error(EINVAL, fmt::format("{}.value: {}", where, target.error().message));
        dependencies.push_back({*scheme, target->id, target->index, *value});
    }
    return {};
}

std::string_view Job::result() const {
    if (state != JobState::inactive)
        return "";
    if (exception_type == "cancel")
        return "canceled";
    if (exception_type == "timeout")
        return "timeout";
    if (!exception_type.empty() || !status || *status != 0)
        return "failed";
    return "completed";
}

nlohmann::json Job::summary() const {
    nlohmann::json s{{"id", id},
                     {"userid", userid},
                     {"name", name},
                     {"state", state_name(state)},
                     {"urgency", urgency},
                     {"priority", priority},
                     {"ntasks", ntasks},
                     {"nnodes", nnodes},
                     {"nodelist", nodelist},
                     {"t_submit", t_submit}};
    if (!queue.empty())
        s["queue"] = queue;
    if (!bank.empty())
        s["bank"] = bank;
    if (!limit.empty())
        s["limit"] = limit;
    if (!instance_uri.empty())
        s["instance"] = instance_uri;
    if (duration > 0)
        s["duration"] = duration;
    if (alloc_cores > 0)
        s["ncores"] = alloc_cores;
    if (t_run > 0)
        s["t_run"] = t_run;
    if (t_cleanup > 0)
        s["t_cleanup"] = t_cleanup;
    if (t_inactive > 0)
        s["t_inactive"] = t_inactive;
    if (state == JobState::inactive)
        s["result"] = result();
    if (status)
        s["status"] = *status;
    if (!exception_type.empty())
        s["exception"] = {{"type", exception_type}, {"note", exception_note}};
    if ((!dependencies.empty() || begin_time > 0 || singleton) && state == JobState::depend) {
        nlohmann::json deps = nlohmann::json::array();
        if (begin_time > 0)
            deps.push_back("begin-time:" + format_moment(begin_time));
        if (singleton)
            deps.push_back("singleton");
        for (const auto& d : dependencies)
            deps.push_back(fmt::format("{}:{}", d.scheme,
                                       d.index ? format_element(d.target, *d.index) : format_jobid(d.target)));
        s["dependencies"] = deps;
    }
    if (array) {
        nlohmann::json a{{"size", array->size}, {"active", array->active}, {"made", array->made},
                         {"failed", array->not_ok.count()}};
        if (IdSet left = array->to_make(); !left.empty() && state < JobState::run)
            a["to_make"] = left.format();
        if (array->throttle > 0)
            a["throttle"] = array->throttle;
        s["array"] = std::move(a);
    }
    if (array_id != 0)
        s["array_of"] = {{"id", array_id}, {"index", array_index}};
    return s;
}

const std::vector<std::string>& Job::summary_columns() {
    static const std::vector<std::string> columns = {"id",        "userid",       "name",       "state",    "urgency",
                                                     "priority",  "ntasks",       "nnodes",     "nodelist", "t_submit",
                                                     "t_run",     "t_cleanup",    "t_inactive", "result",   "status",
                                                     "exception", "dependencies", "queue",      "instance", "bank", "limit",
                                                     "array",     "array_of",     "duration",   "ncores"};
    return columns;
}

const std::string& Job::summary_row() const {
    if (summary_cache.empty()) {
        nlohmann::json s = summary();
        nlohmann::json row = nlohmann::json::array();
        for (const auto& c : summary_columns())
            row.push_back(s.contains(c) ? s[c] : nlohmann::json());
        summary_cache = row.dump();
    }
    return summary_cache;
}

namespace {

// A field of a stored event, typed: one of another type (a damaged
// database) is taken as `fallback`, never thrown on at replay.
template <class T>
T event_field(const nlohmann::json& context, std::string_view key, T fallback) {
    return json_field<T>(context, key, fallback).value_or(fallback);
}

}  // namespace

// A pending job's time limit, name or queue changed (an `update` event,
// jobs.md §3): what the scheduler is sent follows.
void Job::apply_update(const nlohmann::json& c) {
    name = event_field<std::string>(c, "name", name);
    if (array) {
        array->throttle = event_field<uint32_t>(c, "throttle", array->throttle);
        array->updated = array->updated || c.contains("name") || c.contains("duration") || c.contains("queue");
    }
    if (!c.contains("duration") && !c.contains("queue"))
        return;
    duration = event_field<double>(c, "duration", duration);
    duration_updated = duration_updated || c.contains("duration");
    queue = event_field<std::string>(c, "queue", queue);
    auto spec = parse_json(sched_jobspec);
    if (!spec)
        return;  // not pending any more: nothing is sent
    auto& system = (*spec)["attributes"]["system"];
    system["duration"] = duration;  // (RFC 25 requires it; 0: none)
    if (queue.empty())
        system.erase("queue");
    else
        system["queue"] = queue;
    sched_jobspec = spec->dump();
}

void Job::reread_jobspec(const nlohmann::json& spec, const NamedQueues& queues) {
    nlohmann::json now{{"name", name}, {"duration", duration}, {"queue", queue}};
    bool updated = duration_updated;
    if (!read_jobspec(spec, queues)) {
        // Its queue is gone from the config: the default's, else none (as
        // at a restart, recovery.cpp).
        nlohmann::json without = spec;
        if (auto& system = without["attributes"]["system"]; system.is_object())
            system.erase("queue");
        if (!read_jobspec(without, queues))
            (void)read_jobspec(without, NamedQueues{});
    }
    if (!queues.find(queue))
        now.erase("queue");  // gone from the config: where read_jobspec put it
    apply_update(now);
    duration_updated = updated;
    if (array_id != 0)
        drop_array_parts();
}

void Job::drop_array_parts() {
    array.reset();
    dependencies.clear();
    singleton = false;
    begin_time = 0;
}

void Job::requeued() {
    state = JobState::priority;
    requeue_pending = false;
    terminate_signal = 0;
    terminate_grace = -1;
    ++requeues;
    priority = -1;
    ranks.clear();
    nodelist.clear();
    instance_uri.clear();
    nnodes = nnodes_asked;
    started = freed = false;
    status.reset();
    exception_type.clear();
    exception_note.clear();
    t_eligible = t_run = t_finish = t_cleanup = t_inactive = 0;
    alloc_cores = alloc_gpus = 0;
    cpu = 0;
    maxrss = totalrss = 0;
}

void apply_event(Job& job, const JobEvent& ev) {
    job.next_event_seq++;
    job.summary_cache.clear();
    const auto& c = ev.context;
    const std::string& name = ev.name;
    if (name == "submit") {
        job.userid = event_field<uint32_t>(c, "userid", job.userid);
        job.urgency = static_cast<int>(event_field<int64_t>(c, "urgency", job.urgency));
        job.bank = event_field<std::string>(c, "bank", "");
        job.t_submit = ev.timestamp;
        if (const auto& of = json_object_at(c, {"array_of"}); !of.empty()) {
            // An element: its jobspec is the array's, whose dependencies,
            // begin time and indexes were the array's to wait for and make.
            job.array_id = event_field<JobId>(of, "id", 0);
            job.array_index = event_field<uint32_t>(of, "index", 0);
            job.array_size = event_field<uint64_t>(of, "size", 0);
            job.t_submit = event_field<double>(of, "t_submit", ev.timestamp);
            job.drop_array_parts();
        }
    } else if (job.array && name == "element") {
        job.array->made_index(event_field<uint32_t>(c, "index", 0));
        job.array->elements[event_field<uint32_t>(c, "index", 0)] = event_field<JobId>(c, "id", 0);
    } else if (job.array && name == "element-canceled") {
        job.array->canceled.insert(event_field<uint32_t>(c, "index", 0));
    } else if (job.array && name == "element-requeued") {
        job.array->not_ok.erase(event_field<uint32_t>(c, "index", 0));
        if (job.array->not_ok.empty())
            job.array->first_not_ok.clear();
    } else if (job.array && name == "element-end") {
        job.array->not_ok.insert(event_field<uint32_t>(c, "index", 0));
        if (job.array->first_not_ok.empty())
            job.array->first_not_ok = event_field<std::string>(c, "note", "");
    } else if (name == "array-end" && job.state < JobState::run) {
        // Every element ended (or was canceled before it was made).
        job.status = static_cast<int>(event_field<int64_t>(c, "status", 1));
        std::string().swap(job.sched_jobspec);
        job.state = JobState::inactive;
        job.t_cleanup = job.t_inactive = ev.timestamp;
    } else if (name == "depend" && job.state == JobState::depend) {
        job.state = JobState::priority;
    } else if (name == "priority") {
        job.priority = event_field<int64_t>(c, "priority", 0);
        if (job.state == JobState::priority) {
            job.state = JobState::sched;
            job.t_eligible = ev.timestamp;
        }
    } else if (name == "urgency") {
        job.urgency = static_cast<int>(event_field<int64_t>(c, "urgency", job.urgency));
    } else if (name == "update") {
        job.apply_update(c);
    } else if (name == "alloc" && job.state == JobState::sched) {
        job.state = JobState::run;
        std::string().swap(job.sched_jobspec);  // freed (assigning "" would keep its buffer)
        job.t_run = ev.timestamp;
        if (auto r = Rv1::from_json(event_field<nlohmann::json>(c, "R", nlohmann::json()))) {
            job.ranks.clear();
            job.alloc_cores = job.alloc_gpus = 0;
            for (const auto& [rank, children] : r->ranks) {
                job.ranks.push_back(rank);
                job.alloc_cores += static_cast<uint32_t>(children.cores.count());
                job.alloc_gpus += static_cast<uint32_t>(children.gpus.count());
            }
            job.nodelist = r->nodelist.size() > 0 ? r->nodelist.format() : r->rank_set().format();
            job.nnodes = static_cast<uint32_t>(job.ranks.size());
        }
    } else if (name == "start") {
        job.started = true;
    } else if (name == "finish" && (job.state == JobState::run || job.state == JobState::cleanup)) {
        // In CLEANUP: the tasks of a canceled job ended after the exception.
        job.status = static_cast<int>(event_field<int64_t>(c, "status", 1));
        job.t_finish = ev.timestamp;
        const auto& usage = json_object_at(c, {"usage"});
        job.cpu = std::max(0.0, event_field<double>(usage, "cpu", 0));
        job.maxrss = event_field<uint64_t>(usage, "maxrss", 0);
        job.totalrss = event_field<uint64_t>(usage, "totalrss", 0);
        if (job.state == JobState::run) {
            job.state = JobState::cleanup;
            job.t_cleanup = ev.timestamp;
        }
    } else if (name == "exception") {
        if (event_field<int64_t>(c, "severity", 0) == 0 && job.state != JobState::inactive) {
            if (job.exception_type.empty()) {
                job.exception_type = event_field<std::string>(c, "type", "unknown");
                job.exception_note = event_field<std::string>(c, "note", "");
            }
            // A cancel while its requeue is under way: it ends, as asked.
            if (event_field<std::string>(c, "type", "") == "cancel")
                job.requeue_pending = false;
            if (job.state != JobState::cleanup) {
                std::string().swap(job.sched_jobspec);
                job.state = JobState::cleanup;
                job.t_cleanup = ev.timestamp;
            }
        }
    } else if (name == "instance") {
        auto uri = json_field<std::string>(c, "uri", "", "instance");
        job.instance_uri = uri ? *uri : "";
    } else if (name == "free") {
        job.freed = true;
    } else if (name == "requeue") {
        // Running: its tasks end first (CLEANUP), then it is pending again
        // (at `clean`); inactive: at once.
        if (job.state == JobState::run || job.state == JobState::cleanup) {
            job.requeue_pending = true;
            if (job.state == JobState::run) {
                job.state = JobState::cleanup;
                job.t_cleanup = ev.timestamp;
            }
        } else if (job.state == JobState::inactive) {
            job.requeued();
        }
    } else if (name == "clean" && job.state == JobState::cleanup) {
        if (job.requeue_pending) {
            job.requeued();
        } else {
            job.state = JobState::inactive;
            job.t_inactive = ev.timestamp;
            std::vector<OutputSource>().swap(job.output_sources);  // its shells have all ended
        }
    }
}

}  // namespace banyan
