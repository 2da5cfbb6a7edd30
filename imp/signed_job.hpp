// A jobspec its user signed with MUNGE (`banyan submit` signs it), checked
// before banyan-imp starts anything as that user: the credential is
// MUNGE's, it was made by the job's user, it is not older than
// max-credential-age, and it is spent once per job and node of the job's R
// (doc/spec/shell.md §3.1): the rank asked for is in R, R names this host
// for it, and a record in state-dir (MUNGE's own replay cache cannot serve,
// since brokers of one host decode the same credential and it outlives
// MUNGE's time-to-live while the job waits in the queue) holds, per
// credential, the one job it started and the ranks it started, no more of
// them than the nodes the signed jobspec can hold.
#pragma once

#include <cstdint>
#include <ctime>
#include <string>

#include <nlohmann/json.hpp>

#include "core/result.hpp"
#include "imp/imp_config.hpp"

namespace banyan {

struct SignedJobRequest {
    std::string credential;  // "MUNGE:..." whose payload is the jobspec
    uint32_t userid = 0;     // the job's owner, by the job manager
    uint64_t id = 0;         // the job
    uint32_t rank = 0;       // the broker asking
    nlohmann::json R;        // the job's R, from the broker
    std::string hostname;    // this node's, by banyan-imp itself
};

// The jobspec the user signed, or why not, in one line. Checks everything
// but the record first (check_signed_job), then spends the credential on
// this rank (record_first_use): call both, in that order, with whatever
// else must hold before anything is spent in between.
struct SignedJob {
    std::string jobspec;   // the signed payload
    time_t encoded = 0;    // when it was signed (the record's day)
    uint32_t max_nodes = 0;  // the most nodes the jobspec can hold
};
Result<SignedJob> check_signed_job(const SignedJobRequest& request, const ImpConfig& config);
Result<void> record_first_use(const SignedJobRequest& request, const SignedJob& job, const ImpConfig& config);

// The most nodes a jobspec's resources can be given: the counts down to
// its first node or slot level, multiplied and summed (a slot is on one
// node). 0 when it names none.
uint32_t max_nodes_of(const nlohmann::json& jobspec);

}  // namespace banyan
