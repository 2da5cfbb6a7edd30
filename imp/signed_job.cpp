#include "imp/signed_job.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string_view>
#include <vector>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <sodium.h>

#include "core/hostlist.hpp"
#include "core/idset.hpp"
#include "core/jobid.hpp"
#include "core/json_parse.hpp"
#include "core/munge_credential.hpp"
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

// The host R names for `rank`: R's nodelist has one host per rank, in
// rank order.
Result<std::string> host_of_rank(const nlohmann::json& R, uint32_t rank) {
    const auto* execution = R.is_object() && R.contains("execution") && R["execution"].is_object()
                                ? &R["execution"]
                                : nullptr;
    if (!execution || !execution->contains("R_lite") || !(*execution)["R_lite"].is_array())
        return make_error(EPERM, "the job's R has no execution.R_lite");
    IdSet ranks;
    for (const auto& entry : (*execution)["R_lite"]) {
        if (!entry.is_object() || !entry.contains("rank") || !entry["rank"].is_string())
            return make_error(EPERM, "the job's R: an R_lite entry without a rank");
        auto set = IdSet::parse(entry["rank"].get<std::string>());
        if (!set)
            return make_error(EPERM, "the job's R: " + set.error().message);
        // (Counted first: a range of billions must not be listed here.)
        if (set->count() + ranks.count() > HostList::kMaxHosts)
            return make_error(EPERM, fmt::format("the job's R: more than {} ranks", HostList::kMaxHosts));
        for (uint32_t r : set->ids())
            ranks.insert(r);
    }
    if (!ranks.contains(rank))
        return make_error(EPERM, fmt::format("rank {} is not in the job's R ({})", rank, ranks.format()));
    std::string hosts;
    if (execution->contains("nodelist") && (*execution)["nodelist"].is_array())
        for (const auto& part : (*execution)["nodelist"])
            if (part.is_string())
                hosts += (hosts.empty() ? "" : ",") + part.get<std::string>();
    auto nodelist = HostList::parse(hosts);
    if (hosts.empty() || !nodelist || nodelist->size() != ranks.count())
        return make_error(EPERM, "the job's R has no host for each of its ranks (execution.nodelist)");
    size_t index = 0;
    for (uint32_t r : ranks.ids()) {
        if (r == rank)
            break;
        index++;
    }
    return (*nodelist)[index];
}

// Host names compare up to their first dot (a nodelist may hold short names).
bool same_host(std::string_view a, std::string_view b) {
    return a.substr(0, a.find('.')) == b.substr(0, b.find('.'));
}

uint32_t count_of(const nlohmann::json& resource) {
    // (A range with no max is unbounded.)
    const nlohmann::json* count = resource.contains("count") ? &resource["count"] : nullptr;
    if (count && count->is_object()) {
        if (!count->contains("max"))
            return IdSet::kMaxId;
        count = &(*count)["max"];
    }
    if (!count)
        return 1;
    if (!count->is_number_unsigned())
        return 0;
    return static_cast<uint32_t>(std::min<uint64_t>(count->get<uint64_t>(), IdSet::kMaxId));
}

uint64_t nodes_under(const nlohmann::json& resources, uint64_t above) {
    uint64_t total = 0;
    if (!resources.is_array())
        return 0;
    for (const auto& r : resources) {
        if (!r.is_object())
            continue;
        uint64_t n = std::min<uint64_t>(above * count_of(r), IdSet::kMaxId);
        std::string type = r.contains("type") && r["type"].is_string() ? r["type"].get<std::string>() : "";
        if (type == "node" || type == "slot")
            total += n;
        else if (r.contains("with"))
            total += nodes_under(r["with"], n);
        total = std::min<uint64_t>(total, IdSet::kMaxId);
    }
    return total;
}

bool strict_munge_form(std::string_view text) {
    constexpr std::string_view prefix = "MUNGE:";
    if (!text.starts_with(prefix) || text.size() < prefix.size() + 2 || text.back() != ':')
        return false;
    std::string_view body = text.substr(prefix.size(), text.size() - prefix.size() - 1);
    size_t pad = body.find('=');
    if (pad != std::string_view::npos && body.find_first_not_of('=', pad) != std::string_view::npos)
        return false;
    return std::all_of(body.begin(), body.begin() + static_cast<std::ptrdiff_t>(std::min(pad, body.size())),
                       [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/'; });
}

std::string record_path(const SignedJobRequest& request, const ImpConfig& config, time_t encoded) {
    unsigned char hash[32];
    crypto_generichash(hash, sizeof hash, reinterpret_cast<const unsigned char*>(request.credential.data()),
                       request.credential.size(), nullptr, 0);
    char hex[2 * sizeof hash + 1];
    sodium_bin2hex(hex, sizeof hex, hash, sizeof hash);
    return fmt::format("{}/{}/{}", config.state_dir, static_cast<int64_t>(encoded) / kDay, hex);
}

}  // namespace

uint32_t max_nodes_of(const nlohmann::json& jobspec) {
    if (!jobspec.is_object() || !jobspec.contains("resources"))
        return 0;
    return static_cast<uint32_t>(nodes_under(jobspec["resources"], 1));
}

// The record of a credential: its first line the job it started, then one
// line per rank it started. Brokers of one host may spend the same
// credential at once: the record is locked while it is read and written.
Result<void> record_first_use(const SignedJobRequest& request, const SignedJob& job, const ImpConfig& config) {
    std::string record = record_path(request, config, job.encoded);
    std::string day_dir = record.substr(0, record.rfind('/'));
    if (mkdir(config.state_dir.c_str(), 0700) != 0 && errno != EEXIST)
        return make_error(errno, fmt::format("state-dir {}: {}", config.state_dir, std::strerror(errno)));
    if (mkdir(day_dir.c_str(), 0700) != 0 && errno != EEXIST)
        return make_error(errno, fmt::format("{}: {}", day_dir, std::strerror(errno)));
    UniqueFd fd(open(record.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd || flock(fd.get(), LOCK_EX) != 0)
        return make_error(errno, fmt::format("{}: {}", record, std::strerror(errno)));
    std::string text;
    char buf[4096];
    for (ssize_t n; (n = read(fd.get(), buf, sizeof buf)) > 0;)
        text.append(buf, static_cast<size_t>(n));
    std::string job_line = format_jobid(request.id);
    std::vector<std::string> lines;
    for (size_t start = 0, nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
        lines.push_back(text.substr(start, nl - start));
    if (!lines.empty() && lines[0] != job_line)
        return make_error(EPERM, fmt::format("a replayed credential: it started job {}, not {}", lines[0], job_line));
    for (size_t i = 1; i < lines.size(); i++)
        if (lines[i] == std::to_string(request.rank))
            return make_error(EPERM, fmt::format("a replayed credential: it already started rank {}'s shell of {} on "
                                                 "this node",
                                                 request.rank, job_line));
    size_t used = lines.empty() ? 0 : lines.size() - 1;  // (the job's line, then one per rank)
    if (used >= job.max_nodes)
        return make_error(EPERM, fmt::format("a replayed credential: it started {} shells of {}, as many as the nodes "
                                             "its jobspec can hold",
                                             used, job_line));
    std::string add = (lines.empty() ? job_line + "\n" : "") + std::to_string(request.rank) + "\n";
    off_t end = lseek(fd.get(), 0, SEEK_END);
    ssize_t wrote = end < 0 ? -1 : write(fd.get(), add.data(), add.size());
    bool whole = wrote == static_cast<ssize_t>(add.size());
    if (!whole || fsync(fd.get()) != 0) {
        // A record we cannot complete is no record: without it a replay
        // would pass. A part written is taken back (still under the lock),
        // so that the next line is not joined to it.
        int err = wrote >= 0 && !whole ? ENOSPC : errno;
        if (end >= 0)
            (void)ftruncate(fd.get(), end);
        return make_error(err, fmt::format("{}: {}", record, std::strerror(err)));
    }
    int64_t max_days = static_cast<int64_t>(config.max_credential_age) / kDay + 1;
    forget_old_days(config.state_dir, static_cast<int64_t>(std::time(nullptr)) / kDay - max_days);
    return {};
}


Result<SignedJob> check_signed_job(const SignedJobRequest& request, const ImpConfig& config) {
    if (request.credential.empty())
        return make_error(EPERM,
                          "the job is not signed (submitted without MUNGE to an instance that runs jobs as "
                          "their users)");
    // The record is keyed on the credential's text: munged reads the same
    // credential from other texts (blanks, anything after its last ':'), so
    // only its one strict form is taken.
    if (!strict_munge_form(request.credential))
        return make_error(EPERM, "the job's signature is not one MUNGE credential in its plain form (MUNGE:BASE64:)");
    // Expired and replayed by MUNGE's clock and cache are read (see the
    // header); max-credential-age and our records decide instead.
    auto decoded = decode_munge_credential(request.credential);
    if (!decoded)
        return make_error(EPERM, "the job's signature is " + decoded.error().message);
    if (decoded->uid != request.userid)
        return make_error(EPERM, fmt::format("the job's signature was made by uid {}, not by its owner uid {}",
                                             decoded->uid, request.userid));
    time_t encoded = decoded->encoded;
    double age = std::difftime(std::time(nullptr), encoded);
    if (age > config.max_credential_age)
        return make_error(EPERM, fmt::format("the job's signature is {:.0f} s old, more than max-credential-age "
                                             "({:.0f} s): submit it again",
                                             age, config.max_credential_age));
    if (decoded->payload.empty())
        return make_error(EPERM, "the job's signature holds no jobspec");
    auto host = host_of_rank(request.R, request.rank);
    if (!host)
        return host.error();
    if (!same_host(*host, request.hostname))
        return make_error(EPERM, fmt::format("the job's R puts rank {} on {}, not on this node ({})", request.rank,
                                             *host, request.hostname));
    SignedJob job{.jobspec = std::move(decoded->payload), .encoded = encoded};
    auto spec = parse_json(job.jobspec);
    if (!spec || !spec->is_object())
        return make_error(EPERM, "the job's signature holds no jobspec (not a JSON object)");
    job.max_nodes = max_nodes_of(*spec);
    return job;
}

}  // namespace banyan
