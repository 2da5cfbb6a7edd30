#include "broker/resource/resource_service.hpp"

#include <chrono>
#include <tuple>

#include <fmt/format.h>

#include "core/client.hpp"
#include "core/duration.hpp"
#include "core/json_field.hpp"
#include "core/log.hpp"
#include "core/text_file.hpp"
#include "resource/cgroup.hpp"
#include "resource/discovery.hpp"
#include "resource/rv1.hpp"
#include "resource/synthetic.hpp"
#include "sched/constraint.hpp"

namespace banyan {
namespace {

// An R v1 file becomes one socket per rank (R v1 knows no sockets).
Result<std::vector<NodeDescription>> nodes_from_r(const std::string& path) {
    auto text = read_text_file(path);
    if (!text)
        return make_error(text.error().code, "resource.path " + text.error().message);
    auto r = Rv1::parse(*text);
    if (!r)
        return make_error(EINVAL, fmt::format("resource.path {}: {}", path, r.error().message));
    std::vector<NodeDescription> nodes;
    size_t i = 0;
    for (const auto& [rank, children] : r->ranks) {
        std::string host = i < r->nodelist.size() ? r->nodelist[i] : fmt::format("rank{}", rank);
        nodes.push_back({rank, host, {{children.cores, children.gpus, 0}}, {}});
        for (const auto& [name, ranks] : r->properties)
            if (ranks.contains(rank))
                nodes.back().properties.push_back(name);
        i++;
    }
    return nodes;
}

nlohmann::json summary(uint64_t nnodes, uint64_t ncores, uint64_t ngpus, const HostList& hosts, const IdSet& ranks) {
    return {{"nnodes", nnodes},
            {"ncores", ncores},
            {"ngpus", ngpus},
            {"nodelist", hosts.format()},
            {"ranks", ranks.format()}};
}

}  // namespace

Result<std::unique_ptr<ResourceService>> ResourceService::start(Broker& broker) {
    std::unique_ptr<ResourceService> svc(new ResourceService(broker));
    const Bootstrap& boot = broker.bootstrap();
    const Config& config = boot.config;
    svc->declared_ = config.has("resource.path") || config.has("resource.synthetic");
    if (boot.rank == 0) {
        if (auto r = svc->open_database(); !r)
            return r.error();
        if (svc->declared_)
            if (auto r = svc->load_declared_nodes(); !r)
                return r.error();
        if (config.has("resource.exclude")) {
            auto text = config.get_string("resource.exclude");
            if (!text)
                return text.error();
            auto ranks = svc->resolve_targets(*text);
            if (!ranks)
                return make_error(EINVAL,
                                  fmt::format("{}: resource.exclude: {}", config.source(), ranks.error().message));
            svc->excluded_ = *ranks;
        }
        if (auto r = svc->read_config_properties(); !r)
            return r.error();
    }
    if (!svc->declared_) {
        auto xml = config.get_string("resource.hwloc_xml", "");
        auto cache = config.get_string("resource.topology-cache", "");
        if (!xml)
            return xml.error();
        if (!cache)
            return cache.error();
        DiscoveryOptions options{.xml_path = xml->empty() ? "" : fill_template(*xml, boot.hostname, boot.rank),
                                 .limits = read_own_cgroup_limits()};
        if (xml->empty() && !cache->empty())
            options.xml_path = *cache, options.xml_is_this_machine = true;
        auto node = discover_node(boot.rank, boot.hostname, options);
        if (!node)
            return node.error();
        log::info("resource", "this node: {} cores, {} gpus, {} MiB", node->cores().count(), node->gpus().count(),
                  node->memory() >> 20);
        svc->mine_ = std::move(*node);
        if (boot.rank == 0) {
            if (auto r = svc->add_node(svc->mine_); !r)
                return r.error();
            if (auto r = svc->presume_unjoined(); !r)
                return r.error();
        }
    }
    if (boot.rank == 0) {
        ResourceService* self = svc.get();
        broker.add_subtree_listener([self] { self->on_subtree_change(); });
        broker.add_ready_condition([self] {
            if (self->declared_)
                return true;
            SubtreeStates overlay = self->broker_.overlay().subtree();
            for (uint32_t r : overlay.online.ids())
                if (!self->nodes_.count(r) && !self->excluded_.contains(r))
                    return false;
            return true;
        });
    }
    svc->register_methods();
    return svc;
}

void ResourceService::on_subtree_change() {
    if (!declared_) {
        IdSet online = broker_.overlay().subtree().online;
        IdSet joined = online.difference(known_online_);
        known_online_ = online;
        // A broker back with another shape must not get jobs on its old one.
        joined.for_each([this](uint32_t rank) {
            if (rank != 0 && !excluded_.contains(rank))
                describing_.insert(rank);
        });
        describe(joined);
    }
    publish_states(false);
}

void ResourceService::describe(const IdSet& ranks) {
    ranks.for_each([this](uint32_t rank) {
        if (rank == 0 || excluded_.contains(rank))
            return;
        broker_.rpc(Message::request("resource.describe", nlohmann::json::object(), rank),
                    [this, rank](const Message& r) { on_described(rank, r); });
    });
}

void ResourceService::on_described(uint32_t rank, const Message& response) {
    IdSet just{rank};
    describing_ = describing_.difference(just);
    auto body = response_payload(response);
    auto node = body ? NodeDescription::from_json(*body) : Result<NodeDescription>(body.error());
    if (!node) {
        // Gone again before answering: it is asked anew when it returns.
        log::debug("resource", "rank {} did not describe its node: {}", rank, node.error().message);
        return;
    }
    if (node->rank != rank) {
        log::error("resource", "rank {} described itself as rank {}", rank, node->rank);
        return;
    }
    if (auto r = add_node(std::move(*node)); !r) {
        log::error("resource", "rank {}: {}", rank, r.error().message);
        return;
    }
    publish_states(false);  // up again (add_node published a changed shape already)
    broker_.check_ready();
}

Result<void> ResourceService::open_database() {
    std::string path = broker_.bootstrap().statedir + "/banyan.db";
    auto db = Database::open(path, "drain");
    if (!db)
        return db.error();
    if (auto r = db->exec("CREATE TABLE IF NOT EXISTS drain (rank INTEGER PRIMARY KEY, hostname TEXT NOT NULL, "
                          "reason TEXT NOT NULL, timestamp REAL NOT NULL)");
        !r)
        return r;
    auto rows = db->query("SELECT rank, reason, timestamp FROM drain");
    if (!rows)
        return rows.error();
    for (const auto& row : *rows)
        drained_[static_cast<uint32_t>(std::get<int64_t>(row[0]))] =
            Drain{std::get<std::string>(row[1]), std::get<double>(row[2])};
    if (!drained_.empty())
        log::info("resource", "{} drained nodes from {}", drained_.size(), path);
    db_ = std::make_unique<DbWorker>(broker_.reactor(), std::move(*db));
    return {};
}

Result<void> ResourceService::load_declared_nodes() {
    const Config& config = broker_.bootstrap().config;
    Result<std::vector<NodeDescription>> nodes = make_error(EINVAL, "");
    if (config.has("resource.path")) {
        auto path = config.get_string("resource.path");
        if (!path)
            return path.error();
        nodes = nodes_from_r(*path);
    } else {
        auto text = config.get_string("resource.synthetic");
        if (!text)
            return text.error();
        nodes = parse_synthetic_cluster(*text);
    }
    if (!nodes)
        return make_error(EINVAL, fmt::format("{}: {}", config.source(), nodes.error().message));
    for (auto& n : *nodes)
        if (auto r = add_node(std::move(n)); !r)
            return r;
    return {};
}

Result<void> ResourceService::read_config_properties() {
    const Config& config = broker_.bootstrap().config;
    auto table = config.get_string_table("resource.properties");
    if (!table)
        return table.error();
    for (const auto& [name, targets] : *table) {
        std::string key = fmt::format("{}: resource.properties.{}", config.source(), name);
        if (auto ok = check_property_name(name); !ok)
            return make_error(EINVAL, fmt::format("{}: {}", key, ok.error().message));
        auto ranks = resolve_targets(targets);
        if (!ranks)
            return make_error(EINVAL, fmt::format("{}: {}", key, ranks.error().message));
        config_properties_.emplace_back(name, *ranks);
    }
    label_nodes();
    return {};
}

void ResourceService::label_nodes() {
    for (const auto& [name, ranks] : config_properties_)
        ranks.for_each([&](uint32_t rank) {
            if (auto v = graph_.node_of_rank(static_cast<int32_t>(rank)))
                graph_.add_property(*v, name);
        });
}

// Elastic size: ranks that have not joined yet (pods still to come) are
// presumed to be like rank 0's node, as the pods of one Job template are.
// They are in the graph, down, so that a job that needs them waits for
// them instead of being refused; a rank's own description replaces its
// presumed one when it joins.
Result<void> ResourceService::presume_unjoined() {
    for (uint32_t r = 1; r < broker_.bootstrap().size; r++) {
        if (excluded_.contains(r))
            continue;
        if (auto v = graph_.add_node(twin_of_mine(r)); !v)
            return v.error();
        presumed_.insert(r);
    }
    label_nodes();
    return {};
}

NodeDescription ResourceService::twin_of_mine(uint32_t rank) const {
    NodeDescription twin = mine_;
    twin.rank = rank;
    twin.hostname = broker_.bootstrap().host_of(rank);
    return twin;
}

Result<void> ResourceService::rebuild_graph() {
    std::vector<NodeDescription> all;
    for (const auto& [r, n] : nodes_)
        all.push_back(n);
    presumed_.for_each([&](uint32_t r) { all.push_back(twin_of_mine(r)); });
    auto rebuilt = ResourceGraph::from_nodes(all);
    if (!rebuilt)
        return rebuilt.error();
    graph_ = std::move(*rebuilt);
    label_nodes();
    for (const auto& [rank, d] : drained_)
        if (auto v = graph_.node_of_rank(static_cast<int32_t>(rank)))
            graph_[*v].status = VertexStatus::drained;
    publish_states(true);
    return {};
}

Result<void> ResourceService::add_node(NodeDescription node) {
    uint32_t rank = node.rank;
    if (presumed_.contains(rank)) {
        presumed_.erase(rank);
        log::info("resource", "rank {} joined for the first time: {} cores, {} gpus", rank, node.cores().count(),
                  node.gpus().count());
        // Most join as presumed (the pods of one template, the brokers of
        // one test host): their vertices are right already, only their
        // state changes. Rebuilding per join made joining N ranks cost N².
        bool as_presumed = node == twin_of_mine(rank);
        nodes_.emplace(rank, std::move(node));
        return as_presumed ? Result<void>{} : rebuild_graph();  // the caller publishes the new state
    }
    auto it = nodes_.find(rank);
    if (it != nodes_.end()) {
        if (it->second == node)
            return {};
        // A restarted broker with another shape: rebuild the graph.
        it->second = std::move(node);
        log::info("resource", "rank {} came back with another shape: {} cores, {} gpus", rank,
                  nodes_.at(rank).cores().count(), nodes_.at(rank).gpus().count());
        return rebuild_graph();
    }
    if (auto r = graph_.add_node(node); !r)
        return r.error();
    nodes_.emplace(rank, std::move(node));
    label_nodes();
    publish_states(true);
    return {};
}

Result<IdSet> ResourceService::resolve_targets(const std::string& text) const {
    uint32_t known_size = std::max<uint32_t>(broker_.bootstrap().size, nodes_.empty() ? 0 : nodes_.rbegin()->first + 1);
    if (auto ranks = IdSet::parse(text); ranks && !ranks->empty()) {
        if (ranks->last() >= known_size)
            return make_error(ENOENT,
                              fmt::format("no rank {} in this instance (ranks 0-{})", ranks->last(), known_size - 1));
        return *ranks;
    }
    auto hosts = HostList::parse(text);
    if (!hosts || hosts->empty())
        return make_error(EINVAL, fmt::format("'{}' is neither a hostlist nor a rank idset", text));
    IdSet ranks;
    const HostList& configured = broker_.bootstrap().hosts;
    for (const auto& host : *hosts) {
        bool found = false;
        for (const auto& [rank, node] : nodes_)
            if (node.hostname == host) {
                ranks.insert(rank);
                found = true;
            }
        for (size_t r = 0; r < configured.size(); r++)
            if (configured[r] == host) {
                ranks.insert(static_cast<uint32_t>(r));
                found = true;
            }
        if (!found)
            return make_error(ENOENT, fmt::format("no host '{}' in this instance", host));
    }
    return ranks;
}

std::string ResourceService::hostname_of(uint32_t rank) const {
    auto it = nodes_.find(rank);
    return it != nodes_.end() ? it->second.hostname : broker_.bootstrap().host_of(rank);
}

std::string ResourceService::state_of(uint32_t rank, const SubtreeStates& overlay) const {
    if (excluded_.contains(rank))
        return "exclude";
    if (drained_.count(rank))
        return "drained";
    // Declared nodes beyond the brokers are simulated: always there.
    if (rank >= broker_.bootstrap().size || overlay.online.contains(rank))
        return "avail";
    if (overlay.torpid.contains(rank))
        return "torpid";
    if (overlay.lost.contains(rank))
        return "lost";
    if (!declared_ && !nodes_.count(rank))
        return "unjoined";  // never here yet (elastic size), not gone
    return "offline";
}

void ResourceService::register_methods() {
    broker_.register_method("resource.describe", true, [this](const Message& req) {
        if (declared_)
            return broker_.respond_error(req, ENODEV, "resources come from the config, not from discovery");
        broker_.respond(Message::response_to(req, mine_.to_json()));
    });
    broker_.register_method("resource.list", false, broker_.at_rank0([this](const Message& r) { on_list(r); }));
    broker_.register_method("resource.nodes", false, broker_.at_rank0([this](const Message& r) { on_nodes(r); }));
    broker_.register_method("resource.status", false, broker_.at_rank0([this](const Message& r) { on_status(r); }));
    broker_.register_method("resource.R", false, broker_.at_rank0([this](const Message& r) { on_r(r); }));
    broker_.register_method("resource.jgf", false, broker_.at_rank0([this](const Message& r) {
        broker_.respond(Message::response_to(r, graph_.to_jgf()));
    }));
    broker_.register_method("resource.acquire", true, broker_.at_rank0([this](const Message& r) { on_acquire(r); }));
    broker_.register_method("resource.drain", true, broker_.at_rank0([this](const Message& r) { on_drain(r, true); }));
    broker_.register_method("resource.undrain", true,
                            broker_.at_rank0([this](const Message& r) { on_drain(r, false); }));
}

void ResourceService::with_allocated(const Message& req, std::function<void(const Message&, const Rv1&)> answer) {
    broker_.rpc(Message::request("sched.resource-status", nlohmann::json::object(), 0),
                [req, answer = std::move(answer)](const Message& resp) {
                    auto body = response_payload(resp);
                    Result<Rv1> allocated = body && body->contains("allocated") && body->at("allocated").is_object()
                                                ? Rv1::from_json(body->at("allocated"))
                                                : Result<Rv1>(make_error(EPROTO, "no allocated R"));
                    if (!allocated)
                        log::warning("resource", "the scheduler did not say what is allocated: {}",
                                     body ? allocated.error().message : body.error().message);
                    answer(req, allocated ? *allocated : Rv1{});
                });
}

// resource.nodes: one entry per node, for the dashboard's grid and the
// metrics (doc/spec/http.md §4).
void ResourceService::on_nodes(const Message& request) {
    with_allocated(request, [this](const Message& req, const Rv1& allocated) {
        SubtreeStates overlay = broker_.overlay().subtree();
        nlohmann::json nodes = nlohmann::json::array();
        uint32_t top = std::max<uint32_t>(broker_.bootstrap().size, nodes_.empty() ? 0 : nodes_.rbegin()->first + 1);
        for (uint32_t r = 0; r < top; r++) {
            if (declared_ && !nodes_.count(r))
                continue;
            std::string state = state_of(r, overlay);
            nlohmann::json n = {{"rank", r}, {"hostname", hostname_of(r)}};
            uint64_t cores = 0, gpus = 0, cores_used = 0, gpus_used = 0;
            std::vector<std::string> properties;
            if (auto node = nodes_.find(r); node != nodes_.end()) {
                IdSet c = node->second.cores(), g = node->second.gpus();
                cores = c.count();
                gpus = g.count();
                if (auto a = allocated.ranks.find(r); a != allocated.ranks.end()) {
                    cores_used = a->second.cores.intersection(c).count();
                    gpus_used = a->second.gpus.intersection(g).count();
                }
            }
            if (auto v = graph_.node_of_rank(static_cast<int32_t>(r)))
                properties = graph_.properties(*v);
            if (auto d = drained_.find(r); d != drained_.end()) {
                if (state == "drained" && cores_used + gpus_used > 0)
                    state = "draining";
                n["reason"] = d->second.reason;
            }
            n["state"] = state;
            n["cores"] = cores;
            n["cores_used"] = cores_used;
            n["gpus"] = gpus;
            n["gpus_used"] = gpus_used;
            n["properties"] = properties;
            nodes.push_back(std::move(n));
        }
        broker_.respond(Message::response_to(req, {{"nodes", std::move(nodes)}}));
    });
}

void ResourceService::on_list(const Message& request) {
    with_allocated(request, [this](const Message& req, const Rv1& allocated) {
        SubtreeStates overlay = broker_.overlay().subtree();
        struct Sum {
            uint64_t nnodes = 0, ncores = 0, ngpus = 0;
            HostList hosts;
            IdSet ranks;
            void add(uint32_t rank, const std::string& host, uint64_t cores, uint64_t gpus) {
                nnodes++;
                ncores += cores;
                ngpus += gpus;
                hosts.append(host);
                ranks.insert(rank);
            }
        };
        Sum free, used, down;
        for (const auto& [rank, node] : nodes_) {
            std::string state = state_of(rank, overlay);
            if (state == "exclude")
                continue;
            IdSet cores = node.cores(), gpus = node.gpus();
            uint64_t used_cores = 0, used_gpus = 0;
            if (auto a = allocated.ranks.find(rank); a != allocated.ranks.end()) {
                used_cores = a->second.cores.intersection(cores).count();
                used_gpus = a->second.gpus.intersection(gpus).count();
            }
            // Allocated is allocated whatever the node's state; the rest of
            // a node is free if it may take jobs, else down.
            if (used_cores + used_gpus > 0)
                used.add(rank, node.hostname, used_cores, used_gpus);
            uint64_t rest_cores = cores.count() - used_cores, rest_gpus = gpus.count() - used_gpus;
            if (rest_cores + rest_gpus > 0 || used_cores + used_gpus == 0)
                (state == "avail" ? free : down).add(rank, node.hostname, rest_cores, rest_gpus);
        }
        // Ranks that never described a node are down, with nothing counted.
        for (uint32_t r = 0; r < broker_.bootstrap().size; r++) {
            if (!nodes_.count(r) && !excluded_.contains(r) && !declared_) {
                down.nnodes++;
                down.hosts.append(broker_.bootstrap().host_of(r));
                down.ranks.insert(r);
            }
        }
        auto summary_of = [](const Sum& s) { return summary(s.nnodes, s.ncores, s.ngpus, s.hosts, s.ranks); };
        // Each property: the nodes that have it, and how many of them are free.
        std::map<std::string, std::pair<IdSet, uint64_t>> props;
        for (const auto& [rank, v] : graph_.nodes()) {
            auto r = static_cast<uint32_t>(rank);
            if (excluded_.contains(r))
                continue;
            for (const auto& name : graph_.properties(v)) {
                auto& p = props[name];
                p.first.insert(r);
                p.second += free.ranks.contains(r);
            }
        }
        nlohmann::json properties = nlohmann::json::object();
        for (const auto& [name, p] : props) {
            HostList hosts;
            p.first.for_each([&](uint32_t r) { hosts.append(hostname_of(r)); });
            properties[name] = {{"nnodes", p.first.count()},
                                {"nfree", p.second},
                                {"nodelist", hosts.format()},
                                {"ranks", p.first.format()}};
        }
        broker_.respond(Message::response_to(req, {{"free", summary_of(free)},
                                                   {"allocated", summary_of(used)},
                                                   {"down", summary_of(down)},
                                                   {"properties", std::move(properties)}}));
    });
}

void ResourceService::on_status(const Message& request) {
    auto body = request.json();
    auto by_properties = body ? json_field(*body, "properties", false, "resource.status") : Result<bool>(body.error());
    if (!by_properties)
        return broker_.respond_error(request, EPROTO, by_properties.error().message);
    with_allocated(request, [this, split = *by_properties](const Message& req, const Rv1& allocated) {
        SubtreeStates overlay = broker_.overlay().subtree();
        // Group ranks by state, for drained ones by reason, and when asked
        // by their properties.
        std::map<std::tuple<std::string, std::string, std::string>, std::pair<IdSet, double>> groups;
        uint32_t top = std::max<uint32_t>(broker_.bootstrap().size, nodes_.empty() ? 0 : nodes_.rbegin()->first + 1);
        for (uint32_t r = 0; r < top; r++) {
            if (declared_ && !nodes_.count(r))
                continue;
            std::string state = state_of(r, overlay);
            std::string reason;
            double when = 0;
            if (auto d = drained_.find(r); d != drained_.end()) {
                reason = d->second.reason;
                when = d->second.timestamp;
                // Drained with jobs still running there, as Flux says it.
                if (state == "drained" && allocated.ranks.count(r))
                    state = "draining";
            }
            std::string properties;
            if (auto v = graph_.node_of_rank(static_cast<int32_t>(r)); v && split)
                properties = fmt::format("{}", fmt::join(graph_.properties(*v), ","));
            auto& g = groups[{state, reason, properties}];
            g.first.insert(r);
            g.second = std::max(g.second, when);
        }
        nlohmann::json states = nlohmann::json::array();
        for (const auto& [key, group] : groups) {
            const auto& [state, reason, properties] = key;
            HostList hosts;
            group.first.for_each([&](uint32_t r) { hosts.append(hostname_of(r)); });
            nlohmann::json s = {{"state", state},
                                {"ranks", group.first.format()},
                                {"nnodes", group.first.count()},
                                {"nodelist", hosts.format()}};
            if (state == "drained" || state == "draining") {
                s["reason"] = reason;
                s["timestamp"] = group.second;
            }
            if (split)
                s["properties"] = properties;
            states.push_back(s);
        }
        broker_.respond(Message::response_to(req, {{"states", states}}));
    });
}

std::pair<IdSet, IdSet> ResourceService::unschedulable() const {
    SubtreeStates overlay = broker_.overlay().subtree();
    IdSet drained, down;
    for (const auto& [rank, node] : nodes_) {
        if (drained_.count(rank))
            drained.insert(rank);
        bool simulated = rank >= broker_.bootstrap().size;
        if (excluded_.contains(rank) || (!simulated && !overlay.online.contains(rank)) || describing_.contains(rank))
            down.insert(rank);
    }
    down = down.union_with(presumed_);
    return {drained, down};
}

void ResourceService::publish_states(bool graph_changed) {
    if (!acquirer_)
        return;
    auto states = unschedulable();
    if (!graph_changed && states == sent_states_)
        return;
    sent_states_ = states;
    nlohmann::json body = {{"drained", states.first.format()}, {"down", states.second.format()}};
    if (graph_changed)
        body["graph"] = graph_.to_jgf();
    // Local delivery: the scheduler applies it before this returns.
    broker_.respond(Message::response_to(*acquirer_, body));
}

void ResourceService::on_acquire(const Message& req) {
    if (!req.has_flag(msgflag::streaming))
        return broker_.respond_error(req, EPROTO, "resource.acquire: a streaming request is expected");
    if (acquirer_)
        return broker_.respond_error(req, EBUSY, "resource.acquire: the resources are acquired already");
    acquirer_ = req;
    acquirer_->payload.reset();
    publish_states(true);
}

void ResourceService::on_drain(const Message& req, bool drain) {
    auto body = req.json();
    if (!body || !body->contains("targets") || !(*body)["targets"].is_string())
        return broker_.respond_error(req, EPROTO, fmt::format("{}: expected {{\"targets\": HOSTS, ...}}", req.topic));
    auto ranks = resolve_targets((*body)["targets"].get<std::string>());
    if (!ranks)
        return broker_.respond_error(req, ranks.error().code, ranks.error().message);
    auto reason_field = json_field(*body, "reason", std::string(), req.topic);
    if (!reason_field)
        return broker_.respond_error(req, EPROTO, reason_field.error().message);
    std::string reason = *reason_field;
    if (!drain && !reason.empty()) {
        // Only those drained with this reason (a maintenance reservation
        // ends: a node an admin drained for another cause stays drained).
        IdSet with_reason;
        for (uint32_t r : ranks->ids())
            if (auto d = drained_.find(r); d != drained_.end() && d->second.reason == reason)
                with_reason.insert(r);
        *ranks = with_reason;
    } else if (!drain) {
        for (uint32_t r : ranks->ids())
            if (!drained_.count(r))
                return broker_.respond_error(req, EINVAL,
                                             fmt::format("rank {} ({}) is not drained", r, hostname_of(r)));
    }
    // A rank drained already keeps its own reason and time: a name that
    // several ranks share (a test instance's host) must not replace them.
    IdSet fresh, already;
    for (uint32_t r : ranks->ids())
        (drain && drained_.count(r) ? already : fresh).insert(r);
    double when = wall_now();
    std::vector<std::pair<int64_t, std::string>> rows;  // rank, host name
    for (uint32_t r : fresh.ids())
        rows.emplace_back(r, hostname_of(r));
    // All the ranks or none, on the database's thread; the nodes change
    // state once that is on disk.
    db_->run(
        [drain, rows = std::move(rows), reason, when](Database& db) -> Result<void> {
            std::vector<std::pair<std::string_view, std::vector<SqlValue>>> statements;
            for (const auto& [rank, host] : rows)
                if (drain)
                    statements.push_back(
                        {"INSERT OR REPLACE INTO drain VALUES (?, ?, ?, ?)", {rank, host, reason, when}});
                else
                    statements.push_back({"DELETE FROM drain WHERE rank = ?", {rank}});
            return run_all_or_none(db, statements);
        },
        [this, req, drain, ranks = *ranks, fresh, already, reason, when](const Result<void>& stored) {
            on_drain_stored(req, drain, fresh, reason, when, stored,
                            {{"ranks", ranks.format()}, {"changed", fresh.format()}, {"already", already.format()}});
        });
}

void ResourceService::on_drain_stored(const Message& req, bool drain, const IdSet& ranks, const std::string& reason,
                                      double when, const Result<void>& stored, nlohmann::json answer) {
    if (!stored)
        return broker_.respond_error(req, stored.error().code, stored.error().message);
    for (uint32_t r : ranks.ids()) {
        if (drain)
            drained_[r] = Drain{reason, when};
        else
            drained_.erase(r);
        if (auto v = graph_.node_of_rank(static_cast<int32_t>(r)))
            graph_[*v].status = drain ? VertexStatus::drained : VertexStatus::up;
    }
    if (!ranks.empty())
        log::info("resource", "{} rank {}{}", drain ? "drained" : "undrained", ranks.format(),
                  reason.empty() ? "" : ": " + reason);
    broker_.respond(Message::response_to(req, std::move(answer)));
    publish_states(false);
}

void ResourceService::on_r(const Message& req) {
    Rv1 r;
    for (const auto& [rank, node] : nodes_) {
        if (excluded_.contains(rank))
            continue;
        r.ranks[rank] = RankChildren{node.cores(), node.gpus()};
        r.nodelist.append(node.hostname);
    }
    broker_.respond(Message::response_to(req, r.to_json()));
}

}  // namespace banyan
