// AccountingService: rank 0's accounting (doc/spec/accounting.md §4, §9):
// accounting.record stores the job manager's usage records, and
// accounting.history answers a user with theirs (the owner with anyone's).
// It keeps the banks: their tables (changed by the owner, stored before
// the answer), the decayed usage of each association, and its Fair Tree
// factors, computed off the loop and sent to the job manager
// (job-manager.banks) after every change and every recalc-interval.
// Other ranks have none: their requests go up to rank 0.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <utility>

#include "broker/accounting/accounting_db.hpp"
#include "broker/broker.hpp"
#include "sched/banks.hpp"
#include "sched/priority.hpp"

namespace banyan {

class AccountingService {
  public:
    // Rank 0: opens STATEDIR/accounting.db, loads the banks and their
    // usage, and registers the methods; other ranks: nothing. Error names
    // the database or the config key.
    static Result<std::unique_ptr<AccountingService>> start(Broker& broker);

  private:
    AccountingService(Broker& broker, PrioritySettings settings);
    Result<void> load();
    void on_record(const Message& req);
    void on_history(const Message& req);
    void on_banks(const Message& req);
    void on_usage(const Message& req);
    void on_stats(const Message& req);
    // accounting_bank_changes.cpp: the owner's changes, with the body.
    void on_bank_add(const Message& req, const nlohmann::json& body);
    void on_bank_set(const Message& req, const nlohmann::json& body);
    void on_bank_remove(const Message& req, const nlohmann::json& body);
    void on_user_add(const Message& req, const nlohmann::json& body);
    void on_user_set(const Message& req, const nlohmann::json& body);
    void on_user_remove(const Message& req, const nlohmann::json& body);
    Association* named_association(const Message& req, const nlohmann::json& body);
    // Stores `change`, made in banks_ already, and answers `req` once it is
    // committed and the job manager has the factors that follow. A write
    // that fails is answered EIO, and the tables are read back as stored.
    void commit(const Message& req, BankChange change);
    // The change of `userid`'s associations: all of theirs, as they are now.
    BankChange user_change(uint32_t userid) const;
    // Fair-share from the tables and the usage now, on the reader thread;
    // then sent to the job manager, then `then`.
    void publish(std::function<void()> then);
    void compute_and_send(std::function<void()> then);
    // Core-seconds of usage, decayed to `now`.
    double usage_of(uint32_t userid, const std::string& bank, double now) const;
    void add_usage(uint32_t userid, const std::string& bank, double t_end, double core_seconds);

    Broker& broker_;
    PrioritySettings settings_;
    std::unique_ptr<AccountingDb> db_;
    BankTable banks_;      // as changed (stored, or being stored)
    BankTable published_;  // with usage and factors, as last computed
    bool loaded_ = false;  // banks_ is what the store has (a shared one may not answer at start)
    struct Decayed {
        double value = 0;
        double at = 0;
    };
    std::map<std::pair<uint32_t, std::string>, Decayed> usage_;
    Timer recalc_;
    // Since this start of rank 0, by bank ("": none), for /metrics.
    struct Used {
        uint64_t jobs = 0;
        double core_seconds = 0, gpu_seconds = 0;
    };
    std::map<std::string, Used> used_;
};

}  // namespace banyan
