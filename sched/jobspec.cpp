#include "sched/jobspec.hpp"

#include <cmath>
#include <regex>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "core/idset.hpp"
#include "core/json_field.hpp"

namespace banyan {
namespace {

using json = nlohmann::json;

Error bad(const std::string& path, const std::string& what) {
    return make_error(EINVAL, path.empty() ? what : fmt::format("{}: {}", path, what));
}

// --- YAML to JSON ------------------------------------------------------------

json scalar_to_json(const YAML::Node& node) {
    const std::string& text = node.Scalar();
    if (node.Tag() == "!")  // quoted: always a string
        return text;
    static const std::regex integer("[-+]?[0-9]+");
    static const std::regex floating("[-+]?([0-9]+\\.[0-9]*|\\.[0-9]+|[0-9]+)([eE][-+]?[0-9]+)?");
    if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL")
        return nullptr;
    if (text == "true" || text == "True" || text == "TRUE")
        return true;
    if (text == "false" || text == "False" || text == "FALSE")
        return false;
    if (std::regex_match(text, integer)) {
        try {
            return std::stoll(text);
        } catch (const std::out_of_range&) {
            return text;
        }
    }
    if (std::regex_match(text, floating)) {
        try {
            return std::stod(text);
        } catch (const std::out_of_range&) {
            return text;  // beyond a double: left as text, so checks reject it by name
        }
    }
    return text;
}

json node_to_json(const YAML::Node& node) {
    switch (node.Type()) {
        case YAML::NodeType::Null:
        case YAML::NodeType::Undefined:
            return nullptr;
        case YAML::NodeType::Scalar:
            return scalar_to_json(node);
        case YAML::NodeType::Sequence: {
            json out = json::array();
            for (const auto& item : node)
                out.push_back(node_to_json(item));
            return out;
        }
        case YAML::NodeType::Map: {
            json out = json::object();
            for (const auto& kv : node)
                out[kv.first.as<std::string>()] = node_to_json(kv.second);
            return out;
        }
    }
    return nullptr;
}

// --- shared checks -------------------------------------------------------------

bool positive_int(const json& j, int64_t at_least) {
    return j.is_number_integer() && j.get<int64_t>() >= at_least;
}

// Parses "N", "N+", "N-M", "N-M:OPERAND[:OPERATOR]" (RFC 14 count strings).
Result<JobspecCount> parse_count_string(const std::string& text, const std::string& path) {
    static const std::regex form("([0-9]+)(\\+|-([0-9]+)(:([0-9]+)(:([-+*^]))?)?)?");
    std::smatch m;
    if (text.find(',') != std::string::npos) {
        // An idset: the set of counts that will do.
        auto set = IdSet::parse(text);
        if (!set || set->empty() || set->count() > 4096)
            return bad(path, fmt::format("'{}' is not a count set (expected e.g. 4,9,16,25)", text));
        JobspecCount c;
        set->for_each([&](uint32_t v) { c.values.push_back(v); });
        c.min = c.values.front();
        c.max = c.values.back();
        return c;
    }
    if (!std::regex_match(text, m, form))
        return bad(path, fmt::format("'{}' is not a count (expected N, N+, N-M, N-M:OPERAND:OPERATOR or a set "
                                     "like 4,9,16)",
                                     text));
    // Each number is bounded, so a 30-digit count is an error, not an exception.
    auto number = [&](const std::ssub_match& part) { return parse_decimal(part.str(), uint64_t{1} << 62, path); };
    JobspecCount c;
    auto min = number(m[1]);
    if (!min)
        return min.error();
    c.min = *min;
    if (m[2] == "+") {
        c.max = UINT64_MAX;
    } else if (m[3].matched) {
        auto max = number(m[3]);
        if (!max)
            return max.error();
        c.max = *max;
        if (m[5].matched) {
            auto operand = number(m[5]);
            if (!operand)
                return operand.error();
            c.operand = *operand;
        }
        if (m[7].matched)
            c.op = m[7].str()[0];
    }
    return c;
}

Result<void> check_count_range(const JobspecCount& c, const std::string& path) {
    if (c.min < 1)
        return bad(path + ".min", "must be at least 1");
    if (c.max && *c.max < c.min)
        return bad(path + ".max", "must be at least min");
    if (c.op != '+' && c.op != '*' && c.op != '^')
        return bad(path + ".operator", "must be one of +, * or ^");
    if (c.op == '+' && c.operand < 1)
        return bad(path + ".operand", "must be at least 1 for +");
    if ((c.op == '*' || c.op == '^') && c.operand < 2)
        return bad(path + ".operand", fmt::format("must be at least 2 for {}", c.op));
    if (c.op == '^' && c.min < 2)
        return bad(path + ".min", "must be at least 2 for ^");
    return {};
}

// A count in the canonical form: integer >= 1, count string, or mapping.
Result<JobspecCount> canonical_count(const json& j, const std::string& path) {
    if (j.is_number_integer()) {
        if (j.get<int64_t>() < 1)
            return bad(path, "must be at least 1");
        return JobspecCount{static_cast<uint64_t>(j.get<int64_t>())};
    }
    if (j.is_string()) {
        auto c = parse_count_string(j.get<std::string>(), path);
        if (!c)
            return c;
        if (auto r = check_count_range(*c, path); !r)
            return r.error();
        return c;
    }
    if (!j.is_object())
        return bad(path, "expected an integer, a count string or {min, max, operator, operand}");
    JobspecCount c;
    if (!j.contains("min"))
        return bad(path + ".min", "is required");
    if (!positive_int(j["min"], 1))
        return bad(path + ".min", "must be an integer, at least 1");
    c.min = j["min"].get<uint64_t>();
    if (j.contains("max")) {
        if (!positive_int(j["max"], 1))
            return bad(path + ".max", "must be an integer, at least 1");
        c.max = j["max"].get<uint64_t>();
        for (const char* key : {"operator", "operand"})
            if (!j.contains(key))
                return bad(fmt::format("{}.{}", path, key), "is required with max");
    }
    if (j.contains("operator")) {
        if (!j["operator"].is_string() || j["operator"].get<std::string>().size() != 1)
            return bad(path + ".operator", "must be one character: +, * or ^");
        c.op = j["operator"].get<std::string>()[0];
    }
    if (j.contains("operand")) {
        if (!positive_int(j["operand"], 1))
            return bad(path + ".operand", "must be an integer, at least 1");
        c.operand = j["operand"].get<uint64_t>();
    }
    if (auto r = check_count_range(c, path); !r)
        return r.error();
    return c;
}

Result<JobspecResource> canonical_resource(const json& j, const std::string& path) {
    if (!j.is_object())
        return bad(path, "expected a mapping");
    JobspecResource r;
    if (!j.contains("type"))
        return bad(path + ".type", "is required");
    if (!j["type"].is_string() || j["type"].get<std::string>().empty())
        return bad(path + ".type", "must be a non-empty string");
    r.type = j["type"].get<std::string>();
    if (!j.contains("count"))
        return bad(path + ".count", "is required");
    auto count = canonical_count(j["count"], path + ".count");
    if (!count)
        return count.error();
    r.count = *count;
    for (const char* key : {"unit", "label", "id"})
        if (j.contains(key) && !(j[key].is_string() || (std::string(key) == "id" && j[key].is_number_integer())))
            return bad(fmt::format("{}.{}", path, key), "must be a scalar string");
    r.unit = json_field<std::string>(j, "unit", "").value_or("");  // (checked above: a string)
    r.label = json_field<std::string>(j, "label", "").value_or("");
    if (j.contains("exclusive")) {
        if (!j["exclusive"].is_boolean())
            return bad(path + ".exclusive", "must be true or false");
        r.exclusive = j["exclusive"].get<bool>();
    }
    if (r.type == "slot" && r.label.empty())
        return bad(path + ".label", "a slot needs a label");
    if (j.contains("with")) {
        if (!j["with"].is_array() || j["with"].empty())
            return bad(path + ".with", "must be a non-empty sequence of resources");
        for (size_t i = 0; i < j["with"].size(); i++) {
            auto child = canonical_resource(j["with"][i], fmt::format("{}.with[{}]", path, i));
            if (!child)
                return child.error();
            r.with.push_back(std::move(*child));
        }
    }
    return r;
}

Result<JobspecTask> canonical_task(const json& j, const std::string& path) {
    if (!j.is_object())
        return bad(path, "expected a mapping");
    JobspecTask t;
    if (!j.contains("command"))
        return bad(path + ".command", "is required");
    if (!j["command"].is_array() || j["command"].empty())
        return bad(path + ".command", "must be a non-empty sequence of strings");
    for (const auto& arg : j["command"]) {
        if (!arg.is_string())
            return bad(path + ".command", "must be a non-empty sequence of strings");
        t.command.push_back(arg.get<std::string>());
    }
    if (!j.contains("slot") || !j["slot"].is_string())
        return bad(path + ".slot", "is required (the label of a slot)");
    t.slot = j["slot"].get<std::string>();
    if (!j.contains("count") || !j["count"].is_object())
        return bad(path + ".count", "is required: {per_slot: N}, {total: N} or {per_resource: {type, count}}");
    const json& c = j["count"];
    if (c.size() != 1)
        return bad(path + ".count", "must have exactly one of per_slot, total, per_resource");
    t.count_kind = c.begin().key();
    if (t.count_kind == "per_slot" || t.count_kind == "total") {
        if (!positive_int(c.begin().value(), 1))
            return bad(fmt::format("{}.count.{}", path, t.count_kind), "must be an integer, at least 1");
        t.count = c.begin().value().get<uint64_t>();
    } else if (t.count_kind == "per_resource") {
        const json& pr = c["per_resource"];
        if (!pr.is_object() || !pr.contains("type") || !pr["type"].is_string() || !pr.contains("count") ||
            !positive_int(pr["count"], 1))
            return bad(path + ".count.per_resource", "expected {type: STRING, count: N >= 1}");
        t.per_resource_type = pr["type"].get<std::string>();
        t.count = pr["count"].get<uint64_t>();
    } else {
        return bad(fmt::format("{}.count.{}", path, t.count_kind),
                   "unknown (expected per_slot, total or per_resource)");
    }
    return t;
}

Result<void> check_attributes(const json& doc, Jobspec& spec) {
    if (!doc.contains("attributes"))
        return bad("attributes", "is required");
    const json& attrs = doc["attributes"];
    if (!attrs.is_object())
        return bad("attributes", "must be a mapping");
    for (const auto& [key, value] : attrs.items()) {
        if (key != "system" && key != "user")
            return bad("attributes." + key, "unknown (expected system or user)");
        if (!value.is_object() && !value.is_null())
            return bad("attributes." + key, "must be a mapping");
    }
    spec.attributes = attrs;
    if (!attrs.contains("system") || !attrs["system"].is_object())
        return {};
    const json& sys = attrs["system"];
    if (sys.contains("duration")) {
        if (!sys["duration"].is_number() || sys["duration"].get<double>() < 0 ||
            !std::isfinite(sys["duration"].get<double>()))
            return bad("attributes.system.duration", "must be a number of seconds, at least 0");
        spec.duration = sys["duration"].get<double>();
    }
    if (sys.contains("environment") && !sys["environment"].is_object())
        return bad("attributes.system.environment", "must be a mapping");
    if (sys.contains("cwd") && !sys["cwd"].is_string())
        return bad("attributes.system.cwd", "must be a string");
    if (sys.contains("queue") && !sys["queue"].is_string())
        return bad("attributes.system.queue", "must be a string");
    if (sys.contains("reservation")) {
        if (!sys["reservation"].is_string() || sys["reservation"].get<std::string>().empty())
            return bad("attributes.system.reservation", "must be a reservation's name");
        spec.reservation = sys["reservation"].get<std::string>();
    }
    if (sys.contains("constraints")) {
        if (!sys["constraints"].is_object())
            return bad("attributes.system.constraints", "must be a mapping");
        // An empty mapping is no constraint (as Flux writes it).
        if (!sys["constraints"].empty()) {
            auto c = Constraint::from_json(sys["constraints"], "attributes.system.constraints");
            if (!c)
                return c.error();
            spec.constraint = std::move(*c);
        }
    }
    if (const json& options = json_object_at(sys, {"shell", "options"}); options.contains("profile")) {
        const json& p = options["profile"];
        std::string v = p.is_string() ? p.get<std::string>() : "";
        if (v != "network" && v != "cpu" && v != "memory")
            return bad("attributes.system.shell.options.profile", "expected network, cpu or memory");
        spec.profile = v == "network" ? Profile::network : v == "cpu" ? Profile::cpu : Profile::memory;
    }
    if (sys.contains("dependencies")) {
        const json& deps = sys["dependencies"];
        if (!deps.is_array())
            return bad("attributes.system.dependencies", "must be a sequence");
        for (size_t i = 0; i < deps.size(); i++) {
            std::string path = fmt::format("attributes.system.dependencies[{}]", i);
            if (!deps[i].is_object() || !deps[i].contains("scheme") || !deps[i]["scheme"].is_string() ||
                !deps[i].contains("value") || !deps[i]["value"].is_string())
                return bad(path, "expected {scheme: STRING, value: STRING}");
        }
    }
    return {};
}

Result<Jobspec> canonical(const json& doc) {
    if (!doc.is_object())
        return bad("", "a jobspec must be a mapping");
    Jobspec spec;
    if (!doc.contains("version"))
        return bad("version", "is required");
    if (!positive_int(doc["version"], 1))
        return bad("version", "must be an integer, at least 1");
    spec.version = doc["version"].get<int64_t>();
    if (!doc.contains("resources"))
        return bad("resources", "is required");
    if (!doc["resources"].is_array() || doc["resources"].empty())
        return bad("resources", "must be a non-empty sequence");
    for (size_t i = 0; i < doc["resources"].size(); i++) {
        auto r = canonical_resource(doc["resources"][i], fmt::format("resources[{}]", i));
        if (!r)
            return r.error();
        spec.resources.push_back(std::move(*r));
    }
    if (!doc.contains("tasks"))
        return bad("tasks", "is required");
    if (!doc["tasks"].is_array() || doc["tasks"].empty())
        return bad("tasks", "must be a non-empty sequence");
    for (size_t i = 0; i < doc["tasks"].size(); i++) {
        auto t = canonical_task(doc["tasks"][i], fmt::format("tasks[{}]", i));
        if (!t)
            return t.error();
        spec.tasks.push_back(std::move(*t));
    }
    if (auto r = check_attributes(doc, spec); !r)
        return r.error();
    return spec;
}

// --- version 1 (RFC 25) -----------------------------------------------------------

Result<uint64_t> v1_count(const json& r, const std::string& path, int64_t at_least) {
    if (!r.contains("count"))
        return bad(path + ".count", "is required");
    if (!positive_int(r["count"], at_least))
        return bad(path + ".count", fmt::format("must be an integer, at least {} (no ranges in version 1)", at_least));
    return r["count"].get<uint64_t>();
}

// A resource's type, or "" when it has none that is a string.
std::string type_of(const json& r) {
    return json_field(r, "type", std::string()).value_or("");
}

Result<JobspecResource> v1_slot(const json& s, const std::string& path) {
    if (type_of(s) != "slot")
        return bad(path + ".type", "must be slot");
    auto count = v1_count(s, path, 1);
    if (!count)
        return count.error();
    if (!s.contains("label") || !s["label"].is_string())
        return bad(path + ".label", "a slot needs a label");
    JobspecResource slot{.type = "slot", .count = {*count}, .label = s["label"].get<std::string>()};
    if (!s.contains("with") || !s["with"].is_array())
        return bad(path + ".with", "must be a sequence: core, and optionally gpu and memory");
    if (s["with"].empty() || s["with"].size() > 3)
        return bad(path + ".with", "must hold core, and optionally gpu and memory");
    bool seen_core = false, seen_gpu = false, seen_memory = false;
    for (size_t i = 0; i < s["with"].size(); i++) {
        const json& c = s["with"][i];
        std::string cpath = fmt::format("{}.with[{}]", path, i);
        std::string type = type_of(c);
        // memory: Banyan's addition to RFC 25, for --mem (jobspec.md).
        if (type != "core" && type != "gpu" && type != "memory")
            return bad(cpath + ".type", fmt::format(
                                            "'{}' is not allowed here in a version 1 jobspec (expected core, gpu or memory)",
                                            type));
        bool& seen = type == "core" ? seen_core : type == "gpu" ? seen_gpu : seen_memory;
        if (seen)
            return bad(cpath, fmt::format("{} appears twice", type));
        seen = true;
        if (c.contains("with"))
            return bad(cpath + ".with", fmt::format("a {} holds nothing", type));
        auto n = v1_count(c, cpath, type == "gpu" ? 0 : 1);
        if (!n)
            return n.error();
        auto unit = json_field<std::string>(c, "unit", "");
        if (!unit)
            return bad(cpath + ".unit", "expected a string");
        slot.with.push_back(JobspecResource{.type = type, .count = {*n}, .unit = *unit});
    }
    if (!seen_core)
        return bad(path + ".with", "a slot needs core");
    return slot;
}

Result<Jobspec> version1(const json& doc) {
    if (!doc.is_object())
        return bad("", "a jobspec must be a mapping");
    if (!doc.contains("version") || doc["version"] != 1)
        return bad("version", "must be 1 for a version 1 jobspec");
    Jobspec spec;
    if (!doc.contains("resources") || !doc["resources"].is_array() || doc["resources"].size() != 1)
        return bad("resources", "must hold exactly one resource: node or slot");
    const json& top = doc["resources"][0];
    std::string top_type = type_of(top);
    if (top_type == "node") {
        auto count = v1_count(top, "resources[0]", 1);
        if (!count)
            return count.error();
        if (!top.contains("with") || !top["with"].is_array())
            return bad("resources[0].with", "must be a sequence holding one slot");
        if (top["with"].size() != 1)
            return bad("resources[0].with", "must hold exactly one slot");
        auto slot = v1_slot(top["with"][0], "resources[0].with[0]");
        if (!slot)
            return slot.error();
        JobspecResource node{.type = "node", .count = {*count}, .with = {std::move(*slot)}};
        if (top.contains("exclusive")) {
            if (!top["exclusive"].is_boolean())
                return bad("resources[0].exclusive", "must be true or false");
            node.exclusive = top["exclusive"].get<bool>();
        }
        spec.resources.push_back(std::move(node));
    } else if (top_type == "slot") {
        auto slot = v1_slot(top, "resources[0]");
        if (!slot)
            return slot.error();
        spec.resources.push_back(std::move(*slot));
    } else {
        return bad("resources[0].type", "must be node or slot in a version 1 jobspec");
    }
    if (!doc.contains("tasks") || !doc["tasks"].is_array() || doc["tasks"].size() != 1)
        return bad("tasks", "must hold exactly one task");
    auto task = canonical_task(doc["tasks"][0], "tasks[0]");
    if (!task)
        return task.error();
    // Only per node, as Flux's V1 allows it for its batch jobs: one task
    // per node (a nested instance's brokers, doc/spec/instances.md).
    if (task->count_kind == "per_resource" && task->per_resource_type != "node")
        return bad("tasks[0].count.per_resource.type", "only node in a version 1 jobspec (use per_slot or total)");
    spec.tasks.push_back(std::move(*task));
    if (auto r = check_attributes(doc, spec); !r)
        return r.error();
    if (!doc["attributes"].contains("system") || !doc["attributes"]["system"].is_object() ||
        !doc["attributes"]["system"].contains("duration"))
        return bad("attributes.system.duration", "is required in a version 1 jobspec");
    return spec;
}

}  // namespace

Result<nlohmann::json> yaml_to_json(std::string_view text) {
    try {
        YAML::Node root = YAML::Load(std::string(text));
        return node_to_json(root);
    } catch (const YAML::Exception& e) {
        return make_error(EINVAL, fmt::format("not valid YAML or JSON: line {}, column {}: {}", e.mark.line + 1,
                                              e.mark.column + 1, e.msg));
    }
}

Result<Jobspec> Jobspec::from_json(const nlohmann::json& doc, JobspecRules rules) {
    return rules == JobspecRules::v1 ? version1(doc) : canonical(doc);
}

Result<Jobspec> Jobspec::parse(std::string_view text, JobspecRules rules) {
    auto doc = yaml_to_json(text);
    if (!doc)
        return doc.error();
    return from_json(*doc, rules);
}

}  // namespace banyan
