// Rv1: a resource set in Flux's R version 1 format (RFC 20,
// doc/spec/resources.md section 5): for each broker rank, the cores and
// gpus it holds and the memory it may use, plus hostnames, times and
// properties.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/hostlist.hpp"
#include "core/idset.hpp"
#include "core/result.hpp"

namespace banyan {

struct RankChildren {
    IdSet cores;
    IdSet gpus;
    uint64_t memory = 0;  // bytes the job may use on the rank; 0: not limited
    bool operator==(const RankChildren&) const = default;
};

struct Rv1 {
    std::map<uint32_t, RankChildren> ranks;
    HostList nodelist;  // one host per rank, in rank order; may be empty
    double starttime = 0;
    double expiration = 0;
    std::map<std::string, IdSet> properties;   // name -> ranks
    std::optional<nlohmann::json> scheduling;  // carried through untouched

    IdSet rank_set() const;
    // Ranks with equal children share one R_lite entry.
    nlohmann::json to_json() const;
    // Error names the offending key: "R_lite[1].children.core: ...".
    static Result<Rv1> from_json(const nlohmann::json& j);
    static Result<Rv1> parse(std::string_view text);
    bool operator==(const Rv1&) const = default;
};

}  // namespace banyan
