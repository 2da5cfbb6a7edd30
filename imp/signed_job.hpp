// A jobspec its user signed with MUNGE (`banyan submit` signs it), checked
// before banyan-imp starts anything as that user: the credential is
// MUNGE's, it was made by the job's user, it is not older than
// max-credential-age, and it has not started this rank's shell before on
// this node (a record in state-dir; MUNGE's own replay cache cannot serve,
// since brokers of one host decode the same credential and it outlives
// MUNGE's time-to-live while the job waits in the queue).
#pragma once

#include <cstdint>
#include <string>

#include "core/result.hpp"
#include "imp/imp_config.hpp"

namespace banyan {

struct SignedJobRequest {
    std::string credential;  // "MUNGE:..." whose payload is the jobspec
    uint32_t userid = 0;     // the job's owner, by the job manager
    uint64_t id = 0;         // the job
    uint32_t rank = 0;       // the broker asking
};

// The jobspec the user signed, or why not, in one line.
Result<std::string> verify_signed_job(const SignedJobRequest& request, const ImpConfig& config);

}  // namespace banyan
