// Jobspec: what a job asks for (Flux RFC 14, canonical; RFC 25, version 1).
// parse() reads YAML or JSON; the validators check the rules and name the
// path of the offending key: "resources[0].with[1].count: must be at least 1".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.hpp"
#include "sched/constraint.hpp"

namespace banyan {

enum class JobspecRules {
    canonical,  // RFC 14: any resource tree, any version >= 1 (Fluxion's tests use 9999)
    v1,         // RFC 25: node/slot/core/gpu, one task, duration required
};

// A count: a fixed number (min only), or a range min..max stepped by
// operand with operator '+', '*' or '^'.
struct JobspecCount {
    uint64_t min = 1;
    std::optional<uint64_t> max;
    char op = '+';
    uint64_t operand = 1;
    std::vector<uint64_t> values;  // a set of acceptable counts ("4,9,16,25"); empty otherwise
};

struct JobspecResource {
    std::string type;
    JobspecCount count;
    std::string unit;
    std::string label;  // slots only
    std::optional<bool> exclusive;
    std::vector<JobspecResource> with;
};

struct JobspecTask {
    std::vector<std::string> command;
    std::string slot;
    std::string count_kind;  // per_slot, total, per_resource
    uint64_t count = 1;
    std::string per_resource_type;
};

// -o profile= (attributes.system.shell.options.profile): how the scheduler
// places a job's slots when the jobspec names no nodes (sched.md section 4).
enum class Profile { none, network, cpu, memory };

struct Jobspec {
    int64_t version = 1;
    std::vector<JobspecResource> resources;
    std::vector<JobspecTask> tasks;
    nlohmann::json attributes;             // {"system": {...}, "user": {...}}
    double duration = 0;                   // seconds; 0: unlimited
    std::optional<Constraint> constraint;  // attributes.system.constraints (RFC 31)
    Profile profile = Profile::none;
    std::string reservation;               // attributes.system.reservation: run in it (doc/spec/reservations.md)

    // Parses YAML (JSON is YAML too) and validates under `rules`.
    static Result<Jobspec> parse(std::string_view text, JobspecRules rules = JobspecRules::canonical);
    // Validates an already decoded document (as from a submit request).
    static Result<Jobspec> from_json(const nlohmann::json& doc, JobspecRules rules = JobspecRules::canonical);
};

// YAML text to JSON with YAML's core types: plain scalars become integers,
// floats, booleans or null; quoted scalars stay strings.
Result<nlohmann::json> yaml_to_json(std::string_view text);

}  // namespace banyan
