#include "broker/nested.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "broker/pmi_client.hpp"
#include "core/client.hpp"
#include "core/jobid.hpp"
#include "core/json_field.hpp"
#include "core/private_dir.hpp"
#include "core/tree.hpp"
#include "resource/rv1.hpp"

namespace banyan {
namespace {

constexpr uint32_t kFanout = 2;  // tbon.fanout's default
constexpr auto kParentTimeout = std::chrono::seconds(30);

bool is_loopback(const in_addr& a) {
    return (ntohl(a.s_addr) >> 24) == 127;
}

std::string text_of(const in_addr& a) {
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &a, text, sizeof text);
    return text;
}

// The address other nodes reach this one at: the first non-loopback IPv4
// address the host name resolves to, else that of an interface that is
// up, else 127.0.0.1 (a one-host instance).
std::string own_address(const std::string& hostname) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    addrinfo* found = nullptr;
    if (getaddrinfo(hostname.c_str(), nullptr, &hints, &found) == 0) {
        std::string out;
        for (addrinfo* a = found; a && out.empty(); a = a->ai_next) {
            auto* sin = reinterpret_cast<sockaddr_in*>(a->ai_addr);
            if (!is_loopback(sin->sin_addr))
                out = text_of(sin->sin_addr);
        }
        freeaddrinfo(found);
        if (!out.empty())
            return out;
    }
    ifaddrs* list = nullptr;
    std::string out = "127.0.0.1";
    if (getifaddrs(&list) == 0) {
        for (ifaddrs* i = list; i; i = i->ifa_next) {
            if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP))
                continue;
            auto* sin = reinterpret_cast<sockaddr_in*>(i->ifa_addr);
            if (!is_loopback(sin->sin_addr)) {
                out = text_of(sin->sin_addr);
                break;
            }
        }
        freeifaddrs(list);
    }
    return out;
}

// A TCP port free now: bound to port 0 and closed (instances.md §2).
Result<int> free_port() {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return make_error(errno, fmt::format("socket: {}", std::strerror(errno)));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t len = sizeof addr;
    int rc = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    if (rc == 0)
        rc = getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    int err = errno;
    close(fd);
    if (rc != 0)
        return make_error(err, fmt::format("a free TCP port: {}", std::strerror(err)));
    return static_cast<int>(ntohs(addr.sin_port));
}

Result<void> write_file(const std::string& path, const std::string& text, mode_t mode) {
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return make_error(errno, fmt::format("{}: {}", path, std::strerror(errno)));
    ssize_t n = write(fd, text.data(), text.size());
    int err = errno;
    close(fd);
    if (n != static_cast<ssize_t>(text.size()))
        return make_error(err, fmt::format("{}: {}", path, std::strerror(err)));
    return {};
}

// What rank 0 learns from the enclosing instance about its own job.
struct EnclosingJob {
    nlohmann::json R;
    double expiration = 0;
    std::string script;  // the batch script; empty: none
};

Result<EnclosingJob> ask_enclosing_instance() {
    const char* id_text = std::getenv("BANYAN_JOB_ID");
    if (!id_text)
        return make_error(ENOENT, "BANYAN_JOB_ID is not set: --nested runs as a job's tasks");
    auto id = parse_jobid(id_text);
    if (!id)
        return make_error(EINVAL, fmt::format("BANYAN_JOB_ID: {}", id.error().message));
    auto client = Client::connect();
    if (!client)
        return make_error(client.error().code, fmt::format("the enclosing instance: {}", client.error().message));
    auto info = client->rpc("job-manager.info", {{"id", *id}}, kNodeIdAny, kParentTimeout);
    if (!info)
        return make_error(info.error().code,
                          fmt::format("the enclosing instance: job {}: {}", id_text, info.error().message));
    EnclosingJob out;
    if (!info->contains("R") || !(*info)["R"].is_object())
        return make_error(EPROTO, fmt::format("the enclosing instance: job {} has no R", id_text));
    auto R = Rv1::from_json((*info)["R"]);
    if (!R)
        return make_error(EPROTO, fmt::format("the enclosing instance: job {}: R: {}", id_text, R.error().message));
    out.R = (*info)["R"];
    out.expiration = R->expiration;
    auto script = json_field<std::string>(json_object_at(*info, {"jobspec", "attributes", "system", "batch"}), "script",
                                          "", "attributes.system.batch");
    if (!script)
        return script.error();
    out.script = *script;
    return out;
}

// Marks the job as an instance at `uri` in the enclosing instance.
Result<void> tell_enclosing_instance(const std::string& uri) {
    auto id = parse_jobid(std::getenv("BANYAN_JOB_ID"));
    auto client = Client::connect();
    if (!id || !client)
        return make_error(EINVAL, "the enclosing instance cannot be reached");
    auto r = client->rpc("job-manager.instance", {{"id", *id}, {"uri", uri}}, kNodeIdAny, kParentTimeout);
    if (!r)
        return make_error(r.error().code, fmt::format("the enclosing instance: {}", r.error().message));
    return {};
}

}  // namespace

nlohmann::json renumbered_R(const nlohmann::json& R) {
    auto parsed = Rv1::from_json(R);
    if (!parsed)
        return R;
    Rv1 out;
    out.nodelist = parsed->nodelist;
    out.starttime = parsed->starttime;
    out.expiration = parsed->expiration;
    std::map<uint32_t, uint32_t> index;  // enclosing rank -> nested rank
    for (const auto& [rank, children] : parsed->ranks) {
        uint32_t n = static_cast<uint32_t>(index.size());
        index[rank] = n;
        out.ranks[n] = children;
    }
    for (const auto& [name, ranks] : parsed->properties) {
        IdSet renumbered;
        ranks.for_each([&](uint64_t r) {
            if (auto it = index.find(static_cast<uint32_t>(r)); it != index.end())
                renumbered.insert(it->second);
        });
        out.properties[name] = renumbered;
    }
    return out.to_json();
}

namespace {

Result<Bootstrap> bootstrap_through(PmiClient& pmi, BrokerOptions& options, bool batch,
                                    std::vector<std::string>& command) {
    const uint32_t rank = pmi.rank(), size = pmi.size();
    if (options.rundir.empty()) {
        const char* tmpdir = std::getenv("BANYAN_JOB_TMPDIR");
        if (!tmpdir || !*tmpdir)
            return make_error(ENOENT, "BANYAN_JOB_TMPDIR is not set (give --rundir)");
        options.rundir = std::string(tmpdir) + "/broker";
    }
    std::error_code ec;
    options.rundir = std::filesystem::absolute(options.rundir, ec).string();
    if (auto r = make_private_dir(options.rundir, 0700); !r)
        return make_error(r.error().code, "rundir " + r.error().message);
    const std::string r_path = options.rundir + "/R.json";
    options.rank = rank;
    options.settings.push_back(fmt::format("bootstrap.size={}", size));
    options.settings.push_back(fmt::format("resource.path=\"{}\"", r_path));

    TreeShape tree(size, kFanout);
    std::string bind, advertised;
    if (!tree.children(rank).empty()) {
        auto port = free_port();
        if (!port)
            return port.error();
        bind = fmt::format("tcp://*:{}", *port);
        advertised = fmt::format("tcp://{}:{}", own_address(options.hostname), *port);
    }
    // Everything that can fail here does before the barrier, where the
    // others still wait on this broker's part of it.
    BrokerOptions::Endpoints endpoints;
    double expiration = 0;
    if (rank == 0) {
        auto cert = CurveCert::generate();
        if (!cert)
            return cert.error();
        auto job = ask_enclosing_instance();
        if (!job)
            return job.error();
        if (auto r = write_file(r_path, renumbered_R(job->R).dump(), 0600); !r)
            return r.error();
        expiration = job->expiration;
        if (batch) {
            if (!job->script.starts_with("#!"))
                return make_error(EINVAL,
                                  "--batch: the job has no batch script (attributes.system.batch.script "
                                  "starting with #!)");
            std::string script_path = options.rundir + "/script";
            if (auto r = write_file(script_path, job->script, 0700); !r)
                return r.error();
            command.insert(command.begin(), script_path);
        }
        // Before the socket exists: `banyan --job` waits for it to answer.
        if (auto r = tell_enclosing_instance(fmt::format("local://{}/local.sock", options.rundir)); !r)
            return r.error();
        if (auto r = pmi.put("banyan.curve", cert->public_key + " " + cert->secret_key); !r)
            return r.error();
    }
    if (auto r = pmi.put(fmt::format("banyan.{}", rank), options.hostname + " " + advertised); !r)
        return r.error();
    if (auto r = pmi.barrier(); !r)
        return r.error();
    auto keys = pmi.get("banyan.curve");
    if (!keys)
        return keys.error();
    size_t space = keys->find(' ');
    endpoints.cert.public_key = keys->substr(0, space);
    endpoints.cert.secret_key = space == std::string::npos ? "" : keys->substr(space + 1);
    if (auto parent = tree.parent(rank)) {
        auto entry = pmi.get(fmt::format("banyan.{}", *parent));
        if (!entry)
            return entry.error();
        size_t sp = entry->find(' ');
        std::string host = entry->substr(0, sp);
        std::string uri = sp == std::string::npos ? "" : entry->substr(sp + 1);
        if (uri.empty())
            return make_error(EPROTO, fmt::format("rank {} gave no endpoint", *parent));
        // On this host: the loopback, whatever the host's address is.
        if (host == options.hostname)
            uri = "tcp://127.0.0.1" + uri.substr(uri.rfind(':'));
        endpoints.parent = uri;
    }
    endpoints.bind = bind;
    options.endpoints = std::move(endpoints);
    auto boot = make_bootstrap(options);
    if (!boot)
        return boot.error();
    boot->expiration = expiration;
    return boot;
}

}  // namespace

Result<Bootstrap> nested_bootstrap(BrokerOptions& options, bool batch, std::vector<std::string>& command,
                                   std::optional<PmiClient>& pmi) {
    auto client = PmiClient::connect();
    if (!client)
        return make_error(client.error().code, "--nested: " + client.error().message);
    pmi = std::move(*client);
    auto boot = bootstrap_through(*pmi, options, batch, command);
    if (!boot) {
        std::string why = "--nested: " + boot.error().message;
        pmi->abort(1, "banyan-broker: " + why);
        pmi.reset();
        return make_error(boot.error().code, why);
    }
    return boot;
}

}  // namespace banyan
