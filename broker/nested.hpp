// Nested instances (doc/spec/instances.md): a broker started as a task of
// a job (`banyan-broker --nested`) learns its rank, its peers and the
// instance's certificate through the job's PMI-1, and its resources and
// time limit from the enclosing instance. Runs before the event loop.
#pragma once

#include <string>
#include <vector>

#include <optional>

#include "broker/bootstrap.hpp"
#include "broker/pmi_client.hpp"
#include "core/result.hpp"

namespace banyan {

// The bootstrap of a nested instance's broker. `options.rundir` defaults
// to $BANYAN_JOB_TMPDIR/broker. With `batch`, rank 0 writes the job's
// batch script to RUNDIR/script and puts it in front of `command` (its
// arguments). `pmi` is left open: the caller finalizes it once the broker
// runs, or aborts the job with why it could not. Error (the job aborted
// already where PMI was reached): one line saying which step failed.
Result<Bootstrap> nested_bootstrap(BrokerOptions& options, bool batch, std::vector<std::string>& command,
                                   std::optional<PmiClient>& pmi);

// The job's R with its ranks renumbered 0..N-1 in order (hosts, children
// and properties kept, scheduling dropped): the nested instance's R.
nlohmann::json renumbered_R(const nlohmann::json& R);

}  // namespace banyan
