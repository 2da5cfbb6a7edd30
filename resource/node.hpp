// NodeDescription: what one broker tells rank 0 about its node
// (doc/spec/resources.md section 1).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/idset.hpp"
#include "core/result.hpp"

namespace banyan {

struct SocketDescription {
    IdSet cores;
    IdSet gpus;
    uint64_t memory = 0;  // bytes
    bool operator==(const SocketDescription&) const = default;
};

// A property name: not empty, no whitespace or control character, no
// leading '^' or '-' (a constraint query's negations, sched/constraint.hpp),
// none of `,()"'`. Error says what is wrong with `name`.
Result<void> check_property_name(std::string_view name);

struct NodeDescription {
    uint32_t rank = 0;
    std::string hostname;
    std::vector<SocketDescription> sockets;
    // Discovered features ("arch=x86_64", "cpu-vendor=...", ...) and, at
    // rank 0, those given by config or R: names jobs can require.
    std::vector<std::string> properties;

    IdSet cores() const;
    IdSet gpus() const;
    uint64_t memory() const;

    nlohmann::json to_json() const;
    // Error names the field that is missing or of the wrong type.
    static Result<NodeDescription> from_json(const nlohmann::json& j);
    bool operator==(const NodeDescription&) const = default;
};

}  // namespace banyan
