#include "cmd/job_signature.hpp"

#include <cstdlib>
#include <memory>

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <munge.h>

namespace banyan::cli {

bool instance_of_another_user(const Client& client) {
    // Through a job to its nested instance: the job's shell sends on as
    // the job's user, who owns that instance (doc/spec/instances.md §5).
    if (client.uri().find('#') != std::string::npos)
        return false;
    const std::string& path = client.path();
    std::string dir = path.substr(0, path.rfind('/'));
    struct stat st {};
    return stat(dir.empty() ? "/" : dir.c_str(), &st) == 0 && st.st_uid != getuid();
}

Result<std::string> sign_jobspec(const std::string& jobspec_text) {
    char* cred = nullptr;
    munge_err_t err = munge_encode(&cred, nullptr, jobspec_text.data(), static_cast<int>(jobspec_text.size()));
    std::unique_ptr<char, decltype(&std::free)> owned(cred, std::free);
    // MUNGE refuses a payload over its limit (1 MiB unless munged says
    // otherwise) before it asks munged anything: that is no daemon's fault.
    if (err == EMUNGE_BAD_LENGTH)
        return make_error(E2BIG, fmt::format("the job is too large to sign with MUNGE ({} bytes of jobspec, most of "
                                             "them its environment; MUNGE takes 1 MiB): leave large variables out "
                                             "(--env=-NAME)",
                                             jobspec_text.size()));
    if (err != EMUNGE_SUCCESS)
        return make_error(EPERM,
                          fmt::format("cannot sign the job with MUNGE ({}): is munged running?", munge_strerror(err)));
    return std::string(cred);
}

}  // namespace banyan::cli
