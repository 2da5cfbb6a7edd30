// /api/v1/ (doc/spec/http.md §4): each call is one or more requests to
// the instance's services as the token's user, whose answers become JSON
// with job ids as f58 strings.
#include <filesystem>
#include <tuple>

#include <pwd.h>

#include <fmt/format.h>

#include "broker/http/http_service.hpp"
#include "core/byte_size.hpp"
#include "core/config.hpp"
#include "core/idset.hpp"
#include "core/io_data.hpp"
#include "core/jobid.hpp"
#include "core/json_field.hpp"
#include "core/json_parse.hpp"
#include "core/log.hpp"
#include "core/text.hpp"
#include "sched/job_filter.hpp"
#include "sched/job_request.hpp"

namespace banyan {
namespace {

namespace http = boost::beast::http;

// A user's name does not change under a running instance: looked up once
// per uid, kept with its JSON text for the listings.
struct UserName {
    std::string name, json;
};
const UserName& user_of(uint32_t uid) {
    static std::map<uint32_t, UserName> names;
    if (auto it = names.find(uid); it != names.end())
        return it->second;
    const passwd* pw = getpwuid(uid);
    std::string name = pw ? pw->pw_name : std::to_string(uid);
    std::string json = nlohmann::json(name).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return names[uid] = {std::move(name), std::move(json)};
}

}  // namespace

std::string user_name_of(uint32_t uid) {
    return user_of(uid).name;
}

namespace {

// A job summary as the API shows it: id as f58 text, the user's name.
void present_job(nlohmann::json& job) {
    if (job.contains("id") && job["id"].is_number_unsigned())
        job["id"] = format_jobid(job["id"].get<JobId>());
    if (job.contains("userid") && job["userid"].is_number_unsigned())
        job["user"] = user_name_of(job["userid"].get<uint32_t>());
}

// job-manager.list's answer ({"columns": [...], "jobs": [[row]...]}, rows
// in column order) as the API's {"jobs": [job objects]}, written straight
// from its text: ids as f58 text, each user's name beside the uid, rows of
// inactive jobs without one of `results` left out, at most `max` (0: all),
// and to a pending job's object its text in `waiting` (members, each
// after a comma: the scheduler's reason and reserved start).
Result<std::string> jobs_listing(std::string_view payload, const std::set<std::string>& results, uint64_t max,
                                 const std::map<uint64_t, std::string>& waiting) {
    // Found by the one JSON scanner (core/json_parse), without parsing the
    // rows: the listing of 10,000 jobs is rewritten in a few milliseconds
    // (http.md §4).
    auto bad = make_error(EPROTO, "job-manager.list: unexpected answer");
    auto columns_text = json_raw_at(payload, {"columns"});
    auto jobs_text = json_raw_at(payload, {"jobs"});
    if (!columns_text || !jobs_text || !*columns_text || !*jobs_text)
        return bad;
    auto columns_json = parse_json(**columns_text);
    if (!columns_json || !columns_json->is_array())
        return bad;
    std::vector<std::string> columns;
    for (const auto& col : *columns_json)
        columns.push_back(col.is_string() ? col.get<std::string>() : "");
    std::vector<std::string_view> rows;
    if (!json_array_items(**jobs_text, rows))
        return bad;
    auto column = [&](std::string_view name) {
        return static_cast<size_t>(std::find(columns.begin(), columns.end(), name) - columns.begin());
    };
    size_t state_col = column("state"), result_col = column("result");
    std::string out = "{\"jobs\":[";
    out.reserve(payload.size() + payload.size() / 2);  // names and f58 ids are a little longer
    uint64_t kept = 0;
    std::vector<std::string_view> v;
    for (std::string_view row_text : rows) {
        if (!json_array_items(row_text, v) || v.size() != columns.size())
            return bad;
        if (!results.empty() && state_col < v.size() && v[state_col] == "\"inactive\"") {
            std::string_view result = result_col < v.size() ? v[result_col] : "";
            if (result.size() < 2 || !results.count(std::string(result.substr(1, result.size() - 2))))
                continue;
        }
        out += kept ? ",{" : "{";
        bool first = true;
        const std::string* extra = nullptr;
        for (size_t i = 0; i < columns.size(); i++) {
            if (v[i] == "null")
                continue;
            out += first ? "\"" : ",\"";
            first = false;
            out += columns[i];
            out += "\":";
            if (columns[i] == "id") {
                auto id = parse_decimal(v[i], UINT64_MAX, "id");
                if (!id)
                    return bad;
                out += '"';
                out += format_jobid(*id);
                out += '"';
                if (auto w = waiting.find(*id); w != waiting.end())
                    extra = &w->second;
            } else {
                out += v[i];
                if (columns[i] == "userid")
                    if (auto uid = parse_decimal(v[i], UINT32_MAX, "userid"))
                        (out += ",\"user\":") += user_of(static_cast<uint32_t>(*uid)).json;
            }
        }
        if (extra)
            out += *extra;
        out += '}';
        if (++kept == max)
            break;
    }
    out += "]}";
    return out;
}

// Error unless every query parameter is one of `known`.
bool known_query(const HttpCall& call, std::initializer_list<std::string_view> known) {
    for (const auto& [name, value] : call.query)
        if (std::find(known.begin(), known.end(), name) == known.end()) {
            respond_error(*call.exchange, 400,
                          fmt::format("{}: unknown query parameter '{}'", call.path, one_line(name)));
            return false;
        }
    return true;
}

Result<uint64_t> query_number(const HttpCall& call, const std::string& name, uint64_t fallback) {
    auto it = call.query.find(name);
    if (it == call.query.end())
        return fallback;
    const std::string& v = it->second;
    if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos)
        return make_error(EINVAL, fmt::format("{}: expected a non-negative integer, got '{}'", name, one_line(v)));
    return std::stoull(v);
}

// The jobspec (RFC 25 version 1) of POST /api/v1/jobs's fields, as
// banyan submit makes it from its options. Error names the field.
Result<nlohmann::json> jobspec_from_fields(const nlohmann::json& body, uint32_t uid) {
    static const std::set<std::string, std::less<>> known = {
        "command", "ntasks", "nodes",   "cores_per_task", "gpus_per_task", "time_limit", "name", "queue",
        "cwd",     "env",    "urgency", "exclusive",      "umask",         "J",          "bank",
        "memory",  "memory_per_cpu", "reservation", "array"};
    for (const auto& [key, value] : body.items())
        if (!known.count(key))
            return make_error(EINVAL, fmt::format("{}: unknown field (expected jobspec, or {})", one_line(key),
                                                  "command, ntasks, nodes, cores_per_task, gpus_per_task, memory, "
                                                  "memory_per_cpu, time_limit, name, queue, reservation, array, bank, cwd, env, urgency, "
                                                  "exclusive, umask, J"));
    auto command = json_field<nlohmann::json>(body, "command", nlohmann::json::array(), "");
    if (!command || command->empty() ||
        !std::all_of(command->begin(), command->end(), [](const nlohmann::json& w) { return w.is_string(); }))
        return make_error(EINVAL, "command: expected an array of strings, not empty");
    auto nodes = json_field<uint32_t>(body, "nodes", 0, "");
    auto ntasks = json_field<uint32_t>(body, "ntasks", 0, "");
    auto cores = json_field<uint32_t>(body, "cores_per_task", 1, "");
    auto gpus = json_field<uint32_t>(body, "gpus_per_task", 0, "");
    auto limit = json_field<std::string>(body, "time_limit", "", "");
    auto name = json_field<std::string>(body, "name", "", "");
    auto queue = json_field<std::string>(body, "queue", "", "");
    auto bank = json_field<std::string>(body, "bank", "", "");
    auto reservation = json_field<std::string>(body, "reservation", "", "");
    auto array = json_field<std::string>(body, "array", "", "");
    auto cwd = json_field<std::string>(body, "cwd", "", "");
    auto exclusive = json_field<bool>(body, "exclusive", false, "");
    auto env = json_field<nlohmann::json>(body, "env", nlohmann::json::object(), "");
    auto mask = json_field<std::string>(body, "umask", "0022", "");
    auto memory = json_field<std::string>(body, "memory", "", "");
    auto memory_per_cpu = json_field<std::string>(body, "memory_per_cpu", "", "");
    if (auto e = first_error(nodes, ntasks, cores, gpus, limit, name, queue, bank, reservation, array, cwd, exclusive,
                             env, mask, memory, memory_per_cpu))
        return make_error(EINVAL, e->message.substr(e->message.rfind('.') == 0 ? 1 : 0));
    std::map<std::string, std::string> environment;
    for (const auto& [k, v] : env->items()) {
        if (!v.is_string())
            return make_error(EINVAL, fmt::format("env.{}: expected NAME: \"VALUE\" strings", one_line(k)));
        environment[k] = v.get<std::string>();
    }
    // 0 (or absent) leaves nodes and tasks to the defaults.
    JobRequest r{.command = command->get<std::vector<std::string>>(),
                 .nodes = *nodes > 0 ? std::optional<int64_t>(*nodes) : std::nullopt,
                 .ntasks = *ntasks > 0 ? std::optional<int64_t>(*ntasks) : std::nullopt,
                 .cores_per_task = *cores,
                 .gpus_per_task = *gpus,
                 .exclusive = *exclusive,
                 .name = *name,
                 .queue = *queue,
                 .reservation = *reservation,
                 .array = *array,
                 .bank = *bank,
                 .cwd = *cwd,
                 .environment = std::move(environment)};
    for (auto [field, text, into] : {std::tuple{"memory", &*memory, &r.memory_per_node},
                                     std::tuple{"memory_per_cpu", &*memory_per_cpu, &r.memory_per_core}}) {
        if (text->empty())
            continue;
        auto bytes = parse_byte_size(*text, BareSize::refused);
        if (!bytes)
            return make_error(EINVAL, fmt::format("{}: {}", field, bytes.error().message));
        *into = *bytes;
    }
    if (!limit->empty()) {
        auto d = parse_duration(*limit);
        if (!d)
            return make_error(EINVAL,
                              fmt::format("time_limit: '{}': expected a duration as \"10m\"", one_line(*limit)));
        r.time_limit = *d;
    }
    // No login shell stands behind a REST call: a login's default umask,
    // and the shell's own limits (no -o rlimit).
    if (mask->empty() || mask->size() > 4 || mask->find_first_not_of("01234567") != std::string::npos ||
        std::stoul(*mask, nullptr, 8) > 0777)
        return make_error(EINVAL, fmt::format("umask: '{}': expected octal, as \"0027\"", one_line(*mask)));
    r.umask = static_cast<mode_t>(std::stoul(*mask, nullptr, 8));
    if (r.cwd.empty()) {
        const passwd* pw = getpwuid(uid);
        r.cwd = pw && pw->pw_dir ? pw->pw_dir : "/";
    }
    return build_jobspec(r, [](JobField f) -> std::string {
        switch (f) {
            case JobField::command:
                return "command";
            case JobField::nodes:
                return "nodes";
            case JobField::ntasks:
                return "ntasks";
            case JobField::cores_per_task:
                return "cores_per_task";
            case JobField::gpus_per_task:
                return "gpus_per_task";
            case JobField::memory:
                return "memory";
            case JobField::time_limit:
                return "time_limit";
            case JobField::environment:
                return "env";
        }
        return "?";
    });
}

void answered(const std::shared_ptr<HttpExchange>& exchange, const Message& answer,
              const std::function<void(nlohmann::json)>& ok, int wrong_state) {
    if (exchange->closed())
        return;
    if (answer.errnum != 0)
        return respond_error(*exchange, http_status_of(static_cast<int>(answer.errnum), wrong_state),
                             answer.error_text());
    auto payload = answer.json();
    if (!payload)
        return respond_error(*exchange, 503, payload.error().message);
    ok(std::move(*payload));
}

}  // namespace

void HttpService::ask(const HttpCall& call, std::string topic, nlohmann::json body,
                      std::function<void(nlohmann::json)> ok, int wrong_state) {
    auto exchange = call.exchange;
    broker_.rpc_as(call.uid, call.rolemask, Message::request(std::move(topic), body, 0),
                   [exchange, ok = std::move(ok), wrong_state](const Message& answer) {
                       http_barrier("answer", [&] { answered(exchange, answer, ok, wrong_state); });
                   });
}

void HttpService::api(HttpCall call) {
    std::string_view rest = std::string_view(call.path).substr(std::string_view("/api/v1/").size());
    std::vector<std::string> parts;
    while (!rest.empty()) {
        size_t slash = rest.find('/');
        parts.emplace_back(rest.substr(0, slash));
        rest = slash == std::string_view::npos ? "" : rest.substr(slash + 1);
    }
    auto method = call.exchange->request().method();
    bool get = method == http::verb::get, post = method == http::verb::post;
    auto only = [&](const char* allow) {
        call.exchange->respond(
            405, "application/json",
            nlohmann::json{{"status", 405}, {"message", fmt::format("{}: only {}", call.path, allow)}}.dump(),
            {{"Allow", allow}});
    };
    auto is = [&](std::initializer_list<std::string_view> want) {
        if (want.size() != parts.size())
            return false;
        size_t i = 0;
        for (auto w : want) {
            if (w != "*" && w != parts[i])
                return false;
            i++;
        }
        return true;
    };
    if (is({"jobs"}))
        return get ? api_jobs(call) : post ? api_submit(call) : only("GET, POST");
    if (parts.size() >= 2 && parts[0] == "jobs") {
        auto id = parse_jobid(parts[1]);
        if (!id)
            return respond_error(*call.exchange, 404, fmt::format("no such job: {}", id.error().message));
        if (is({"jobs", "*"}))
            return get ? api_job(call, *id) : only("GET");
        if (is({"jobs", "*", "eventlog"}))
            return get ? api_eventlog(call, *id) : only("GET");
        if (is({"jobs", "*", "output"}))
            return get ? api_output(call, *id) : only("GET");
        if (is({"jobs", "*", "profile"}))
            return get ? api_profile(call, *id) : only("GET");
        if (is({"jobs", "*", "cancel"}))
            return post ? api_cancel(call, *id) : only("POST");
    }
    if (is({"resources"}))
        return get ? api_resources(call) : only("GET");
    auto relay = [&](const char* topic, const char* key) {
        if (!get)
            return only("GET");
        if (!known_query(call, {}))
            return;
        auto exchange = call.exchange;
        ask(call, topic, nlohmann::json::object(), [exchange, key](nlohmann::json answer) {
            respond_json(*exchange, 200, key ? nlohmann::json{{key, answer[key]}} : answer);
        });
    };
    if (is({"queues"}))
        return relay("job-manager.queue-list", "queues");
    if (is({"overlay"}))
        return relay("overlay.status", nullptr);
    if (is({"history"}) || is({"usage"}))
        return get ? api_accounting(call, parts[0] == "history") : only("GET");
    if (is({"activity"})) {
        if (!get)
            return only("GET");
        if (!known_query(call, {}))
            return;
        nlohmann::json samples = nlohmann::json::array();
        for (const auto& s : history_)
            samples.push_back({{"t", s.t}, {"pending", s.pending}, {"running", s.running}, {"completed", s.completed}});
        return respond_json(*call.exchange, 200, {{"period", 10}, {"samples", std::move(samples)}});
    }
    if (is({"events"}))
        return get ? api_events(call) : only("GET");
    respond_error(*call.exchange, 404, fmt::format("no such path: {}", one_line(call.path)));
}

void HttpService::api_accounting(const HttpCall& call, bool history) {
    enum class Kind { number, flag, text, list };
    static const std::vector<std::pair<std::string, Kind>> history_params = {
        {"userid", Kind::number}, {"all", Kind::flag},     {"since", Kind::number},
        {"until", Kind::number},  {"results", Kind::list}, {"name", Kind::text},
        {"bank", Kind::text},     {"count", Kind::number}, {"node", Kind::text}};
    static const std::vector<std::pair<std::string, Kind>> usage_params = {{"userid", Kind::number},
                                                                           {"all", Kind::flag},
                                                                           {"since", Kind::number},
                                                                           {"until", Kind::number},
                                                                           {"by", Kind::text}};
    const auto& params = history ? history_params : usage_params;
    nlohmann::json body = nlohmann::json::object();
    for (const auto& [name, value] : call.query) {
        auto p = std::find_if(params.begin(), params.end(), [&](const auto& kv) { return kv.first == name; });
        if (p == params.end())
            return respond_error(*call.exchange, 400,
                                 fmt::format("{}: unknown query parameter '{}'", call.path, one_line(name)));
        switch (p->second) {
            case Kind::number: {
                auto n = query_number(call, name, 0);
                if (!n)
                    return respond_error(*call.exchange, 400, n.error().message);
                body[name] = *n;
                break;
            }
            case Kind::flag:
                if (value != "1" && value != "true")
                    return respond_error(*call.exchange, 400, fmt::format("{}: expected 1", name));
                body[name] = true;
                break;
            case Kind::text:
                body[name] = value;
                break;
            case Kind::list:
                body[name] = split_commas(value);
                break;
        }
    }
    auto exchange = call.exchange;
    ask(call, history ? "accounting.history" : "accounting.usage", body, [exchange, history](nlohmann::json answer) {
        if (!history)
            return respond_json(*exchange, 200, {{"rows", answer["rows"]}});
        nlohmann::json records = answer["records"];
        for (auto& r : records)  // ids as everywhere in the API: f58 strings
            if (r.is_object() && r.contains("id") && r["id"].is_number_unsigned())
                r["id"] = format_jobid(r["id"].get<uint64_t>());
        respond_json(*exchange, 200, {{"records", std::move(records)}});
    });
}

void HttpService::api_jobs(const HttpCall& call) {
    if (!known_query(call, {"filter", "all", "users", "count"}))
        return;
    nlohmann::json body = nlohmann::json::object();
    std::set<std::string> results;
    if (auto f = call.query.find("filter"); f != call.query.end()) {
        auto filter = parse_job_filter(f->second);
        if (!filter)
            return respond_error(*call.exchange, 400, "filter=" + filter.error().message);
        body["states"] = filter->states;
        results = filter->results;
    } else if (auto a = call.query.find("all"); a != call.query.end()) {
        if (a->second != "1" && a->second != "true")
            return respond_error(*call.exchange, 400, "all: expected 1 (every state)");
        body["states"] = {"depend", "priority", "sched", "run", "cleanup", "inactive"};
    }
    if (auto u = call.query.find("users"); u != call.query.end()) {
        if (u->second != "all")
            return respond_error(*call.exchange, 400, "users: expected all (every user's jobs)");
        if (!(call.rolemask & role::owner))
            return respond_error(*call.exchange, 403, "users=all: only the instance owner may list every user's jobs");
        body["all_users"] = true;
    }
    auto count = query_number(call, "count", 0);
    if (!count)
        return respond_error(*call.exchange, 400, count.error().message);
    if (*count > 0 && results.empty())
        body["max"] = *count;
    auto exchange = call.exchange;
    auto list = [this, exchange, uid = call.uid, rolemask = call.rolemask, body, results,
                 max = *count](std::map<uint64_t, std::string> waiting) {
        // Rewritten from the answer's text, not parsed: 10,000 jobs in
        // milliseconds (bench/http).
        broker_.rpc_as(uid, rolemask, Message::request("job-manager.list", body, 0),
                       [exchange, results, max, waiting = std::move(waiting)](const Message& answer) {
                           http_barrier("list", [&] {
                               if (exchange->closed())
                                   return;
                               if (answer.errnum != 0)
                                   return respond_error(*exchange, http_status_of(static_cast<int>(answer.errnum)),
                                                        answer.error_text());
                               auto text = jobs_listing(answer.payload.value_or(""), results, max, waiting);
                               if (!text)
                                   return respond_error(*exchange, 503, text.error().message);
                               exchange->respond(200, "application/json", std::move(*text), {});
                           });
                       });
    };
    // Pending jobs are listed (by default, or asked for): first what the
    // scheduler says of them, why each waits and when it is reserved to
    // start. A scheduler that does not answer leaves those out.
    const auto& states = json_array_at(body, "states");
    if (body.contains("states") && std::find(states.begin(), states.end(), "sched") == states.end())
        return list({});
    broker_.rpc_as(call.uid, call.rolemask, Message::request("sched.queue", nlohmann::json::object(), 0),
                   [list](const Message& answer) {
                       http_barrier("queue", [&] {
                           std::map<uint64_t, std::string> waiting;
                           nlohmann::json queue;
                           if (auto parsed = answer.json(); !answer.errnum && parsed)
                               queue = std::move(*parsed);
                           for (const auto& p : json_array_at(queue, "jobs")) {
                               auto id = json_field<uint64_t>(p, "id", 0, "jobs[]");
                               auto reason = json_field<std::string>(p, "reason", "", "jobs[]");
                               auto t = json_field<int64_t>(p, "t_estimate", -1, "jobs[]");
                               if (first_error(id, reason, t))
                                   continue;
                               std::string& extra = waiting[*id];
                               extra = ",\"reason\":" + nlohmann::json(*reason).dump();
                               if (*t >= 0)
                                   extra += ",\"t_estimate\":" + std::to_string(*t);
                           }
                           list(std::move(waiting));
                       });
                   });
}

void HttpService::api_job(const HttpCall& call, uint64_t id) {
    if (!known_query(call, {}))
        return;
    auto exchange = call.exchange;
    ask(call, "job-manager.info", {{"id", id}}, [exchange](nlohmann::json answer) {
        if (answer.contains("job"))
            present_job(answer["job"]);
        respond_json(*exchange, 200, answer);
    });
}

// The job's eBPF profile (doc/spec/profiling.md §6), as job-manager.profile-get.
void HttpService::api_profile(const HttpCall& call, uint64_t id) {
    if (!known_query(call, {}))
        return;
    auto exchange = call.exchange;
    ask(call, "job-manager.profile-get", {{"id", id}},
        [exchange](nlohmann::json answer) { respond_json(*exchange, 200, answer); });
}

void HttpService::api_eventlog(const HttpCall& call, uint64_t id) {
    if (!known_query(call, {"follow"}))
        return;
    const auto& request = call.exchange->request();
    auto accept = request.find(http::field::accept);
    bool stream = (accept != request.end() && accept->value().find("text/event-stream") != std::string_view::npos) ||
                  call.query.count("follow");
    if (stream)
        return stream_events(call, id);
    auto exchange = call.exchange;
    ask(call, "job-manager.eventlog", {{"id", id}}, [exchange](nlohmann::json answer) {
        respond_json(*exchange, 200, {{"events", answer["events"]}});
    });
}

void HttpService::api_output(const HttpCall& call, uint64_t id) {
    if (!known_query(call, {"from"}))
        return;
    auto from = query_number(call, "from", 0);
    if (!from || *from > UINT32_MAX)
        return respond_error(*call.exchange, 400, from ? "from: too large" : from.error().message);
    auto exchange = call.exchange;
    // From event 0, attach answers at once (every job has events).
    ask(call, "job-manager.attach", {{"id", id}, {"events_from", 0}, {"output_from", *from}},
        [exchange, from = *from](nlohmann::json answer) {
            nlohmann::json output = nlohmann::json::array();
            for (const auto& chunk : answer["output"]) {
                auto data = io_data(chunk, "output");
                if (!data)
                    continue;
                output.push_back({{"rank", chunk["rank"]}, {"stream", chunk["stream"]}, {"data", std::move(*data)}});
            }
            auto next = json_field<uint64_t>(answer, "output_next", from, "attach");
            bool done = answer.contains("done") && answer["done"].is_boolean() && answer["done"].get<bool>();
            respond_json(*exchange, 200,
                         {{"output", std::move(output)}, {"next", next.value_or(from)}, {"done", done}});
        });
}

void HttpService::api_submit(const HttpCall& call) {
    if (!known_query(call, {}))
        return;
    auto body = parse_json(call.exchange->request().body());
    if (!body || !body->is_object())
        return respond_error(*call.exchange, 400,
                             body ? "the body: expected a JSON object" : "the body: " + body.error().message);
    nlohmann::json request = nlohmann::json::object();
    if (body->contains("jobspec")) {
        for (const auto& [key, value] : body->items())
            if (key != "jobspec" && key != "urgency" && key != "J")
                return respond_error(
                    *call.exchange, 400,
                    fmt::format("{}: unknown field beside jobspec (expected urgency, J)", one_line(key)));
        request["jobspec"] = (*body)["jobspec"];
    } else {
        auto spec = jobspec_from_fields(*body, call.uid);
        if (!spec)
            return respond_error(*call.exchange, 400, spec.error().message);
        request["jobspec"] = std::move(*spec);
    }
    auto urgency = json_field<int64_t>(*body, "urgency", 16, "");
    auto signature = json_field<std::string>(*body, "J", "", "");
    if (auto e = first_error(urgency, signature))
        return respond_error(*call.exchange, 400, e->message.substr(e->message[0] == '.' ? 1 : 0));
    if (*urgency < 0 || *urgency > 31)
        return respond_error(*call.exchange, 400, "urgency: expected 0 (hold) to 31 (expedite)");
    request["urgency"] = *urgency;
    if (!signature->empty())
        request["J"] = *signature;
    auto exchange = call.exchange;
    ask(call, "job-manager.submit", request, [exchange](nlohmann::json answer) {
        auto id = json_field<uint64_t>(answer, "id", 0, "submit");
        respond_json(*exchange, 201, {{"id", format_jobid(id.value_or(0))}});
    });
}

void HttpService::api_cancel(const HttpCall& call, uint64_t id) {
    if (!known_query(call, {}))
        return;
    const std::string& text = call.exchange->request().body();
    auto body = text.empty() ? Result<nlohmann::json>(nlohmann::json::object()) : parse_json(text);
    if (!body || !body->is_object())
        return respond_error(*call.exchange, 400,
                             body ? "the body: expected a JSON object" : "the body: " + body.error().message);
    for (const auto& [key, value] : body->items())
        if (key != "note")
            return respond_error(*call.exchange, 400, fmt::format("{}: unknown field (expected note)", one_line(key)));
    auto note = json_field<std::string>(*body, "note", "", "");
    if (!note)
        return respond_error(*call.exchange, 400, "note: expected a string");
    nlohmann::json request{{"id", id}};
    if (!note->empty())
        request["note"] = *note;
    auto exchange = call.exchange;
    ask(
        call, "job-manager.cancel", request,
        [exchange](nlohmann::json) { respond_json(*exchange, 200, nlohmann::json::object()); }, 409);
}

void HttpService::api_resources(const HttpCall& call) {
    if (!known_query(call, {}))
        return;
    auto exchange = call.exchange;
    HttpCall again = call;
    ask(call, "resource.list", nlohmann::json::object(), [this, exchange, again](nlohmann::json summary) {
        ask(again, "resource.nodes", nlohmann::json::object(), [exchange, summary](nlohmann::json nodes) {
            respond_json(*exchange, 200, {{"summary", summary}, {"nodes", nodes["nodes"]}});
        });
    });
}

// Job events as Server-Sent Events (http.md §4): every job the caller may
// see, or one job's from its first event to its last. Both ride on one
// job-manager.events stream, subscribed before the job's eventlog is
// asked for: an event posted before the subscription is in the eventlog
// (read once it is on disk), one posted after it is streamed. The stream
// is cancelled when the client goes.
void HttpService::stream_events(const HttpCall& call, std::optional<JobId> job) {
    struct Follow {
        std::shared_ptr<HttpExchange> exchange;
        std::optional<JobId> job;
        bool started = false;
        bool have_log = false;             // one job: its eventlog was sent
        uint32_t next_seq = 0;             // ... and the next event to send
        std::vector<nlohmann::json> held;  // ... events that came before it
        uint32_t matchtag = 0;
    };
    auto follow = std::make_shared<Follow>();
    follow->exchange = call.exchange;
    follow->job = job;
    uint32_t uid = call.uid, rolemask = call.rolemask;
    // Sends one event; true once the job's stream is complete.
    auto send = [](Follow& f, nlohmann::json ev) {
        auto seq = json_field<uint32_t>(ev, "seq", 0, "event");
        auto name = json_field<std::string>(ev, "name", "", "event");
        if (f.job) {
            if (!seq || *seq < f.next_seq)
                return false;
            f.next_seq = *seq + 1;
        }
        if (ev.contains("id") && ev["id"].is_number_unsigned())
            ev["id"] = format_jobid(ev["id"].get<JobId>());
        f.exchange->send_event("job", ev.dump());
        return f.job && name && *name == "clean";
    };
    auto finish = [](Follow& f) {
        f.exchange->send_event("end", "{}");
        f.exchange->end_events();
    };
    Message request = Message::request("job-manager.events", nlohmann::json::object(), 0);
    request.flags |= msgflag::streaming;
    follow->matchtag = broker_.rpc_as(uid, rolemask, std::move(request), [follow, send, finish](const Message& answer) {
        http_barrier("events", [&] {
            Follow& f = *follow;
            if (f.exchange->closed())
                return;
            if (answer.errnum != 0) {
                if (!f.started)
                    return respond_error(*f.exchange, http_status_of(static_cast<int>(answer.errnum)),
                                         answer.error_text());
                return f.exchange->end_events();
            }
            auto payload = answer.json();
            if (!payload || !payload->contains("events"))
                return;
            for (auto& ev : (*payload)["events"]) {
                if (f.job && json_field<uint64_t>(ev, "id", 0, "event").value_or(0) != *f.job)
                    continue;
                if (f.job && !f.have_log) {
                    f.held.push_back(std::move(ev));
                    continue;
                }
                if (send(f, std::move(ev)))
                    return finish(f);
            }
        });
    });
    auto cancel = [this, follow, uid, rolemask] {
        // Posted: the close may come from inside a job-manager answer.
        broker_.reactor().post([this, matchtag = follow->matchtag, uid, rolemask] {
            broker_.rpc_as(uid, rolemask, Message::request("job-manager.events-cancel", {{"matchtag", matchtag}}, 0),
                           [](const Message&) {});
        });
    };
    if (!job) {
        follow->started = true;
        return call.exchange->start_events(cancel);
    }
    broker_.rpc_as(uid, rolemask, Message::request("job-manager.eventlog", {{"id", *job}}, 0),
                   [follow, send, finish, cancel](const Message& answer) {
                       http_barrier("eventlog", [&] {
                           Follow& f = *follow;
                           auto payload = answer.errnum == 0 ? answer.json() : Result<nlohmann::json>(Error{});
                           if (!payload) {
                               cancel();
                               return respond_error(*f.exchange, http_status_of(static_cast<int>(answer.errnum)),
                                                    answer.error_text());
                           }
                           f.started = true;
                           f.exchange->start_events(cancel);
                           f.have_log = true;
                           uint32_t seq = 0;
                           bool complete = false;
                           for (auto& ev : (*payload)["events"]) {
                               ev["seq"] = seq++;
                               complete = send(f, std::move(ev)) || complete;
                           }
                           for (auto& ev : std::exchange(f.held, {}))
                               complete = send(f, std::move(ev)) || complete;
                           if (complete)
                               finish(f);
                       });
                   });
}

void HttpService::api_events(const HttpCall& call) {
    if (!known_query(call, {}))
        return;
    stream_events(call, std::nullopt);
}

}  // namespace banyan
