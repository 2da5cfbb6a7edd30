#include "broker/bootstrap.hpp"

#include <cstdlib>

#include <fmt/format.h>

#include "core/idset.hpp"

namespace banyan {
namespace {

constexpr uint32_t kMaxSize = 1u << 20;

Result<void> check_known_keys(const Config& config) {
    const std::vector<std::pair<std::string_view, std::vector<std::string_view>>> tables = {
        {"bootstrap", {"hosts", "size", "port", "bind", "connect", "curve_cert"}},
        {"tbon",
         {"fanout", "heartbeat_period", "torpid_timeout", "lost_timeout", "hello_timeout", "connect_max_backoff",
          "tcp_timeout", "replay_timeout"}},
        {"broker", {"quorum", "shutdown_timeout", "connections-per-user", "stop-keeps-jobs"}},
        {"resource", {"path", "synthetic", "hwloc_xml", "topology-cache", "exclude", "properties"}},
        {"sched", {"queue-policy", "match-policy", "queue-depth", "reservation-depth"}},
        {"job-manager",
         {"inactive-age", "inactive-limit", "sched-window", "output-limit", "max-active-per-user",
          "max-pending-per-user", "max-array-size", "max-array-index", "mail-program"}},
        {"exec",
         {"kill-timeout", "job-shell", "reattach-timeout", "imp", "prolog", "epilog", "prolog-timeout",
          "container-cache", "container-cache-size"}},
        {"access", {"admins"}},
        {"accounting", {"database", "cluster"}},
        {"priority",
         {"weight-fairshare", "weight-urgency", "weight-age", "weight-queue", "weight-size", "max-age",
          "decay-half-life", "recalc-interval"}},
        {"http", {"listen", "open", "max-body", "token-key"}},
        {"profiling", {"enable", "users", "queues"}},
    };
    // Every table at the top, then every key of each (queues.NAME: the
    // named queues check theirs, sched/named_queues.cpp).
    std::vector<std::string_view> names{"queues"};
    for (const auto& [table, keys] : tables)
        names.push_back(table);
    if (auto r = config.check_keys("", names); !r)
        return r;
    for (const auto& [table, keys] : tables)
        if (auto r = config.check_keys(table, keys); !r)
            return r;
    return {};
}

// Rank from --rank, $BANYAN_RANK, or this host's index in the host list.
Result<uint32_t> find_rank(const BrokerOptions& options, const Bootstrap& b) {
    if (options.rank)
        return *options.rank;
    if (const char* env = std::getenv("BANYAN_RANK"); env && *env) {
        auto r = parse_decimal(env, kMaxSize - 1, "BANYAN_RANK");
        if (!r)
            return r.error();
        return static_cast<uint32_t>(*r);
    }
    if (b.hosts.empty())
        return 0u;
    auto index = b.hosts.find(b.hostname);
    if (!index)
        return make_error(ENOENT, fmt::format("host '{}' is not in bootstrap.hosts ({}); set --rank or BANYAN_RANK",
                                              b.hostname, b.hosts.format()));
    return static_cast<uint32_t>(*index);
}

}  // namespace

std::string fill_template(std::string_view tmpl, const std::string& host, uint32_t rank, std::optional<int64_t> port) {
    std::string out;
    for (size_t i = 0; i < tmpl.size(); i++) {
        if (tmpl[i] == '%' && i + 1 < tmpl.size()) {
            char c = tmpl[++i];
            if (c == 'h')
                out += host;
            else if (c == 'p' && port)
                out += std::to_string(*port);
            else if (c == 'r')
                out += std::to_string(rank);
            else
                out += std::string("%") + c;
        } else {
            out += tmpl[i];
        }
    }
    return out;
}

std::string Bootstrap::host_of(uint32_t r) const {
    return r < hosts.size() ? hosts[r] : hostname;
}

Result<Bootstrap> make_bootstrap(const BrokerOptions& options) {
    Config config;
    if (!options.config_path.empty()) {
        auto loaded = Config::load(options.config_path);
        if (!loaded)
            return loaded.error();
        config = std::move(*loaded);
        // An empty or cut-short file (a ConfigMap not yet filled) must not
        // start a one-broker instance of its own.
        if (config.empty())
            return make_error(
                EINVAL, fmt::format("{}: the config file is empty (expected [bootstrap] hosts)", options.config_path));
    }
    for (const auto& setting : options.settings)
        if (auto r = config.set_from_text(setting); !r)
            return make_error(EINVAL, fmt::format("--setattr {}", r.error().message));
    if (auto r = check_known_keys(config); !r)
        return r.error();

    Bootstrap b;
    b.hostname = options.hostname;
    b.rundir = options.rundir;
    b.statedir = options.statedir;
    if (!options.config_path.empty() && !config.has("bootstrap.hosts") && !config.has("bootstrap.size"))
        return make_error(EINVAL, fmt::format("{}: bootstrap.hosts is missing (the instance's host names; or "
                                              "bootstrap.size, with each broker's --rank)",
                                              config.source()));
    if (config.has("bootstrap.hosts")) {
        auto text = config.get_string("bootstrap.hosts");
        if (!text)
            return text.error();
        auto hosts = HostList::parse(*text);
        if (!hosts)
            return make_error(EINVAL, fmt::format("{}: bootstrap.hosts: {}", config.source(), hosts.error().message));
        if (hosts->empty())
            return make_error(EINVAL, fmt::format("{}: bootstrap.hosts is empty", config.source()));
        b.hosts = std::move(*hosts);
        b.size = static_cast<uint32_t>(b.hosts.size());
    } else {
        auto size = config.get_int("bootstrap.size", 1, kMaxSize, 1);
        if (!size)
            return size.error();
        b.size = static_cast<uint32_t>(*size);
    }
    auto rank = find_rank(options, b);
    if (!rank)
        return rank.error();
    if (*rank >= b.size)
        return make_error(EINVAL, fmt::format("rank {} is out of range: the instance has {} ranks", *rank, b.size));
    b.rank = *rank;

    auto fanout = config.get_int("tbon.fanout", 0, 65536, 2);
    auto port = config.get_int("bootstrap.port", 1, 65535, 8050);
    auto bind = config.get_string("bootstrap.bind", "tcp://*:%p");
    auto connect = config.get_string("bootstrap.connect", "tcp://%h:%p");
    auto quorum = config.get_int("broker.quorum", 1, b.size, b.size);
    for (const Result<int64_t>* r : {&fanout, &port, &quorum})
        if (!*r)
            return r->error();
    for (const Result<std::string>* r : {&bind, &connect})
        if (!*r)
            return r->error();
    b.fanout = static_cast<uint32_t>(*fanout);
    b.quorum = static_cast<uint32_t>(*quorum);
    auto keeps = config.get_bool("broker.stop-keeps-jobs", true);
    if (!keeps)
        return keeps.error();
    b.stop_keeps_jobs = *keeps;

    struct Timeout {
        const char* key;
        double* value;
    };
    for (auto [key, value] :
         {Timeout{"tbon.heartbeat_period", &b.heartbeat_period}, Timeout{"tbon.torpid_timeout", &b.torpid_timeout},
          Timeout{"tbon.lost_timeout", &b.lost_timeout}, Timeout{"tbon.hello_timeout", &b.hello_timeout},
          Timeout{"tbon.connect_max_backoff", &b.connect_max_backoff}, Timeout{"tbon.tcp_timeout", &b.tcp_timeout},
          Timeout{"tbon.replay_timeout", &b.replay_timeout}, Timeout{"broker.shutdown_timeout", &b.shutdown_timeout}}) {
        auto d = config.get_duration(key, *value);
        if (!d)
            return d.error();
        if (*d <= 0)
            return make_error(EINVAL, fmt::format("{}: {}: must be more than 0", config.source(), key));
        *value = *d;
    }

    if (options.endpoints) {
        b.bind_uri = options.endpoints->bind;
        b.parent_uri = options.endpoints->parent;
        b.cert = options.endpoints->cert;
    } else {
        if (!b.children().empty())
            b.bind_uri = fill_template(*bind, b.host_of(b.rank), b.rank, *port);
        if (auto parent = b.parent())
            b.parent_uri = fill_template(*connect, b.host_of(*parent), *parent, *port);
    }

    if (!options.endpoints && config.has("bootstrap.curve_cert")) {
        auto path = config.get_string("bootstrap.curve_cert");
        if (!path)
            return path.error();
        auto cert = CurveCert::load(*path);
        if (!cert)
            return cert.error();
        b.cert = std::move(*cert);
    }
    b.config = std::move(config);
    bool uses_tcp = b.bind_uri.rfind("tcp://", 0) == 0 || b.parent_uri.rfind("tcp://", 0) == 0;
    if (uses_tcp && !b.cert)
        return make_error(EINVAL, fmt::format("{}: bootstrap.curve_cert is required for tcp:// endpoints "
                                              "(make one with `banyan keygen`)",
                                              b.config.source()));
    return b;
}

}  // namespace banyan
