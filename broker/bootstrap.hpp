// Bootstrap: everything a broker learns before it joins the tree — its rank,
// the instance size and shape, its endpoints and timeouts — from the TOML
// config, command-line overrides and the host name (doc/spec/overlay.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "broker/overlay/protocol.hpp"
#include "core/config.hpp"
#include "core/curve_cert.hpp"
#include "core/hostlist.hpp"
#include "core/result.hpp"
#include "core/tree.hpp"

namespace banyan {

struct BrokerOptions {
    std::string config_path;            // empty: embedded defaults only
    std::vector<std::string> settings;  // "KEY=VALUE" overrides of config keys
    std::optional<uint32_t> rank;       // --rank, else $BANYAN_RANK, else from hosts
    std::string rundir;                 // where the local socket lives
    std::string statedir;               // rank 0's database (empty: RUNDIR/state)
    std::string hostname;               // this machine's name
    // A nested instance's endpoints and certificate, learned through PMI
    // (broker/nested.hpp): used instead of bootstrap.bind, .connect and
    // .curve_cert.
    struct Endpoints {
        std::string bind;    // empty: no children
        std::string parent;  // empty at rank 0
        CurveCert cert;
    };
    std::optional<Endpoints> endpoints;
};

struct Bootstrap {
    uint32_t rank = 0;
    uint32_t size = 1;
    uint32_t fanout = 2;
    std::string hostname;
    HostList hosts;          // empty for a hostless (test) instance
    std::string bind_uri;    // empty when this rank has no children
    std::string parent_uri;  // empty at rank 0
    std::optional<CurveCert> cert;
    std::string rundir;
    std::string statedir;
    Config config;  // the whole config, overrides applied (for services' own tables)
    uint32_t quorum = 1;
    double heartbeat_period = 2;
    double torpid_timeout = 30;
    double lost_timeout = 60;
    double hello_timeout = 2;
    double connect_max_backoff = 2;
    double tcp_timeout = 5;
    double replay_timeout = 10;  // an event.replay unanswered this long is asked again
    double shutdown_timeout = 30;
    // broker.stop-keeps-jobs: SIGTERM or SIGINT makes this broker leave
    // alone and its jobs' shells wait to be re-attached (overlay.md §9).
    bool stop_keeps_jobs = true;
    // The overlay protocol this broker speaks (kProtocolVersion but in a
    // test's banyan-broker-previous).
    uint32_t protocol = kProtocolVersion;
    // A nested instance's end: the enclosing job's expiration (seconds
    // since the epoch; 0: none), which bounds every job inside.
    double expiration = 0;

    TreeShape tree() const { return TreeShape(size, fanout); }
    std::optional<uint32_t> parent() const { return tree().parent(rank); }
    std::vector<uint32_t> children() const { return tree().children(rank); }
    // The host name of `r`: from hosts, or this machine's for a hostless instance.
    std::string host_of(uint32_t r) const;
};

// Error names the config file and key, or the host that is not listed.
Result<Bootstrap> make_bootstrap(const BrokerOptions& options);

// Fills a config template: %h the host, %r the rank, %p the port (left as
// is when `port` is not given); any other %X stays as written.
std::string fill_template(std::string_view tmpl, const std::string& host, uint32_t rank,
                          std::optional<int64_t> port = std::nullopt);

}  // namespace banyan
