// ReservationService: advance reservations at rank 0
// (doc/spec/reservations.md). It keeps them (STATEDIR/reservations.db),
// gives each to the scheduler (sched.reserve, which chooses and plans the
// nodes), drains a maintenance reservation's nodes for its window, ends
// each at its end (sched.unreserve), and tells the job manager at submit
// whether a job may run in one (reservation.check).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "broker/broker.hpp"
#include "core/db_worker.hpp"
#include "core/idset.hpp"
#include "core/reactor.hpp"

namespace banyan {

struct Reservation {
    std::string name;
    int64_t start = 0;
    int64_t end = 0;
    IdSet ranks;
    std::string hosts;
    std::vector<uint32_t> users;
    std::vector<std::string> banks;
    bool maintenance = false;
    uint32_t userid = 0;
    double t_create = 0;

    nlohmann::json to_json() const;
    // Error names the bad field (a stored row, read back).
    static Result<Reservation> from_json(const nlohmann::json& j);
};

class ReservationService {
  public:
    // At rank 0: opens the database, gives every kept reservation to the
    // scheduler again (before the job manager's first request) and
    // registers the methods. Error names the database and why.
    static Result<std::unique_ptr<ReservationService>> start(Broker& broker);

  private:
    explicit ReservationService(Broker& broker) : broker_(broker), timer_(broker.reactor()) {}
    Result<void> open_database();
    void register_methods();
    void on_create(const Message& req);
    void on_list(const Message& req);
    void on_delete(const Message& req);
    void on_check(const Message& req);
    // The scheduler chose its nodes: stored, then kept and answered.
    void store(const Message& req, Reservation r);
    // Gone (deleted, or `why` "ended"): out of the database, the
    // scheduler and, for maintenance, the drain; then `done` (an error:
    // the database refused, and it is kept).
    void finish(const std::string& name, const std::string& why, std::function<void(const Result<void>&)> done);
    // Drains maintenance reservations that have begun, ends those past
    // their end, and sleeps until the next such moment.
    void tick();

    Broker& broker_;
    std::unique_ptr<DbWorker> db_;
    std::map<std::string, Reservation> reservations_;
    std::set<std::string> drained_;  // maintenance reservations whose nodes this run drained
    std::set<std::string> busy_;     // names being made or ended (a second request waits its turn: EBUSY)
    Timer timer_;
};

}  // namespace banyan
