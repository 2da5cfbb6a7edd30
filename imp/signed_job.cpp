#include "imp/signed_job.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <munge.h>
#include <sodium.h>

#include "core/jobid.hpp"
#include "core/unique_fd.hpp"

namespace banyan {
namespace {

constexpr int64_t kDay = 86400;

// Records live in one directory per day of the credentials' encode time,
// so that forgetting the ones past max-credential-age is removing whole
// directories, never reading every record.
void forget_old_days(const std::string& dir, int64_t oldest_day) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        const std::string name = entry.path().filename().string();
        char* end = nullptr;
        long long day = std::strtoll(name.c_str(), &end, 10);
        if (end && *end == '\0' && day < oldest_day)
            std::filesystem::remove_all(entry.path(), ec);
    }
}

Result<void> record_first_use(const SignedJobRequest& request, const ImpConfig& config, time_t encoded) {
    unsigned char hash[32];
    crypto_generichash(hash, sizeof hash, reinterpret_cast<const unsigned char*>(request.credential.data()),
                       request.credential.size(), nullptr, 0);
    char hex[2 * sizeof hash + 1];
    sodium_bin2hex(hex, sizeof hex, hash, sizeof hash);
    int64_t day = static_cast<int64_t>(encoded) / kDay;
    std::string day_dir = fmt::format("{}/{}", config.state_dir, day);
    if (mkdir(config.state_dir.c_str(), 0700) != 0 && errno != EEXIST)
        return make_error(errno, fmt::format("state-dir {}: {}", config.state_dir, std::strerror(errno)));
    if (mkdir(day_dir.c_str(), 0700) != 0 && errno != EEXIST)
        return make_error(errno, fmt::format("{}: {}", day_dir, std::strerror(errno)));
    std::string record = fmt::format("{}/{}-{}", day_dir, hex, request.rank);
    UniqueFd fd(open(record.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd && errno == EEXIST)
        return make_error(EPERM, fmt::format("a replayed credential: it already started rank {}'s shell on this "
                                             "node (now for {})",
                                             request.rank, format_jobid(request.id)));
    if (!fd)
        return make_error(errno, fmt::format("{}: {}", record, std::strerror(errno)));
    std::string line = format_jobid(request.id) + "\n";
    if (write(fd.get(), line.data(), line.size()) < 0) {
        // A record we cannot complete is no record: without it a replay
        // would pass.
        int err = errno;
        unlink(record.c_str());
        return make_error(err, fmt::format("{}: {}", record, std::strerror(err)));
    }
    int64_t max_days = static_cast<int64_t>(config.max_credential_age) / kDay + 1;
    forget_old_days(config.state_dir, static_cast<int64_t>(std::time(nullptr)) / kDay - max_days);
    return {};
}

}  // namespace

Result<std::string> verify_signed_job(const SignedJobRequest& request, const ImpConfig& config) {
    if (request.credential.empty())
        return make_error(EPERM,
                          "the job is not signed (submitted without MUNGE to an instance that runs jobs as "
                          "their users)");
    std::unique_ptr<munge_ctx, decltype(&munge_ctx_destroy)> ctx(munge_ctx_create(), munge_ctx_destroy);
    if (!ctx)
        return make_error(ENOMEM, "munge_ctx_create failed");
    void* payload = nullptr;
    int length = 0;
    uid_t uid = 0;
    gid_t gid = 0;
    munge_err_t err = munge_decode(request.credential.c_str(), ctx.get(), &payload, &length, &uid, &gid);
    std::unique_ptr<void, decltype(&std::free)> owned(payload, std::free);
    // Expired and replayed by MUNGE's clock and cache are expected (see the
    // header); max-credential-age and our records decide instead.
    if (err != EMUNGE_SUCCESS && err != EMUNGE_CRED_EXPIRED && err != EMUNGE_CRED_REPLAYED)
        return make_error(
            EPERM, fmt::format("the job's signature is refused by MUNGE: {}",
                               munge_ctx_strerror(ctx.get()) ? munge_ctx_strerror(ctx.get()) : munge_strerror(err)));
    if (uid != request.userid)
        return make_error(
            EPERM, fmt::format("the job's signature was made by uid {}, not by its owner uid {}", uid, request.userid));
    time_t encoded = 0;
    if (munge_ctx_get(ctx.get(), MUNGE_OPT_ENCODE_TIME, &encoded) != EMUNGE_SUCCESS)
        return make_error(EPERM, "the job's signature has no time");
    double age = std::difftime(std::time(nullptr), encoded);
    if (age > config.max_credential_age)
        return make_error(EPERM, fmt::format("the job's signature is {:.0f} s old, more than max-credential-age "
                                             "({:.0f} s): submit it again",
                                             age, config.max_credential_age));
    if (!payload || length <= 0)
        return make_error(EPERM, "the job's signature holds no jobspec");
    if (auto r = record_first_use(request, config, encoded); !r)
        return r.error();
    return std::string(static_cast<const char*>(payload), static_cast<size_t>(length));
}

}  // namespace banyan
