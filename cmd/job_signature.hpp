// Signing jobspecs with MUNGE (doc/spec/jobs.md §7): where the instance
// runs as another user (a system instance runs as `banyan`), jobs run as
// their submitters through banyan-imp, which starts nothing unsigned.
#pragma once

#include <string>

#include "core/client.hpp"
#include "core/result.hpp"

namespace banyan::cli {

// True when the broker behind `client` runs as another user than this
// process (its socket's directory is that user's).
bool instance_of_another_user(const Client& client);

// A MUNGE credential whose payload is `jobspec_text`; error in one line,
// naming munged when it does not answer.
Result<std::string> sign_jobspec(const std::string& jobspec_text);

}  // namespace banyan::cli
