// ResourceService: every broker describes its node to rank 0; rank 0 keeps
// the cluster graph, node states and drain reasons (persisted in
// STATEDIR/banyan.db) and answers resource.* (doc/spec/resources.md section 7).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "broker/broker.hpp"
#include "core/sqlite.hpp"
#include "resource/graph.hpp"
#include "resource/node.hpp"

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

    explicit ResourceService(Broker& broker) : broker_(broker), hello_timer_(broker.reactor()) {}
    void send_hello();
    Result<void> load_declared_nodes();
    Result<void> open_database();
    void register_methods();
    Result<void> add_node(NodeDescription node);
    Result<IdSet> resolve_targets(const std::string& text) const;
    std::string state_of(uint32_t rank, const SubtreeStates& overlay) const;

    void on_hello(const Message& req);
    void on_list(const Message& req);
    void on_status(const Message& req);
    void on_drain(const Message& req, bool drain);
    void on_r(const Message& req);

    Broker& broker_;
    bool declared_ = false;  // nodes come from config, not from hellos
    std::map<uint32_t, NodeDescription> nodes_;  // rank 0 only
    ResourceGraph graph_;
    IdSet excluded_;
    std::map<uint32_t, Drain> drained_;
    std::optional<Database> db_;
    NodeDescription mine_;  // followers: this node, until rank 0 has it
    Timer hello_timer_;
    std::chrono::milliseconds hello_backoff_{0};
};

}  // namespace banyan
