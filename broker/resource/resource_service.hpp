// ResourceService: rank 0 asks every rank that comes online to describe its
// node (resource.describe), so a rank is described once the path to it is
// up, also after rank 0 itself restarts; rank 0 keeps
// the cluster graph, node states and drain reasons (persisted in
// STATEDIR/banyan.db) and answers resource.* (doc/spec/resources.md section 7).
// It is the one source of node state: the scheduler acquires the graph and
// then every change of it (resource.acquire, a stream), and resource.list
// and resource.status ask the scheduler what is allocated.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "broker/broker.hpp"
#include "core/db_worker.hpp"
#include "resource/graph.hpp"
#include "resource/node.hpp"
#include "resource/rv1.hpp"

namespace banyan {

class ResourceService {
  public:
    // Discovers this node (or reads [resource] path/synthetic at rank 0) and
    // registers the methods. Error: discovery failed, the R file or synthetic
    // description is bad, or the database cannot be opened.
    static Result<std::unique_ptr<ResourceService>> start(Broker& broker);

  private:
    struct Drain {
        std::string reason;
        double timestamp = 0;
    };
    struct NodeState {
        std::string state;  // avail, drained, offline, torpid
        uint32_t rank;
    };

    explicit ResourceService(Broker& broker) : broker_(broker) {}
    // Rank 0: asks each rank that just came online for its node.
    void on_subtree_change();
    // Asks each of `ranks` for its node (resource.describe).
    void describe(const IdSet& ranks);
    Result<void> load_declared_nodes();
    Result<void> open_database();
    void register_methods();
    Result<void> add_node(NodeDescription node);
    Result<void> presume_unjoined();
    NodeDescription twin_of_mine(uint32_t rank) const;  // rank 0's node, as `rank`
    Result<void> rebuild_graph();  // from nodes_ and presumed_, drains applied
    Result<IdSet> resolve_targets(const std::string& text) const;
    std::string state_of(uint32_t rank, const SubtreeStates& overlay) const;
    // The node's host name once described, else the configured one.
    std::string hostname_of(uint32_t rank) const;

    void on_described(uint32_t rank, const Message& response);
    void on_list(const Message& req);
    void on_nodes(const Message& request);
    void on_status(const Message& req);
    void on_drain(const Message& req, bool drain);
    // Once the drain or undrain of `ranks` is on disk (or failed).
    void on_drain_stored(const Message& req, bool drain, const IdSet& ranks, const std::string& reason, double when,
                         const Result<void>& stored, nlohmann::json answer);
    void on_r(const Message& req);
    void on_acquire(const Message& req);
    // Sends the acquirer the node states (and the graph, when it changed)
    // if they differ from what it last got. Rank 0 only.
    void publish_states(bool graph_changed);
    // Ranks whose nodes may not get new jobs, by cause: drained, and down
    // (offline, torpid, lost, excluded, or not described yet).
    std::pair<IdSet, IdSet> unschedulable() const;
    // Asks the scheduler what is allocated now, then calls `answer` with it
    // (empty if the scheduler cannot say).
    void with_allocated(const Message& req, std::function<void(const Message&, const Rv1&)> answer);

    Broker& broker_;
    bool declared_ = false;                      // nodes come from config, not from discovery
    std::map<uint32_t, NodeDescription> nodes_;  // rank 0 only
    std::optional<Message> acquirer_;            // the scheduler's resource.acquire stream
    std::pair<IdSet, IdSet> sent_states_;        // drained, down: as the acquirer last got them
    ResourceGraph graph_;
    IdSet excluded_;
    // [resource] properties: name -> the ranks that have it.
    std::vector<std::pair<std::string, IdSet>> config_properties_;
    Result<void> read_config_properties();
    // Adds the config's properties to the graph's nodes (after any change).
    void label_nodes();
    std::map<uint32_t, Drain> drained_;
    std::unique_ptr<DbWorker> db_;  // rank 0: drains are written on its thread
    NodeDescription mine_;  // this node, as discovered
    IdSet known_online_;    // rank 0: the online ranks at the last change
    IdSet describing_;      // rank 0: joined, not described yet: down until they are
    IdSet presumed_;        // rank 0: never joined: in the graph as rank 0's twin, down
};

}  // namespace banyan
