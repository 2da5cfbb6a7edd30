// AccountingService: rank 0's accounting (doc/spec/accounting.md §4):
// accounting.record stores the job manager's usage records, and
// accounting.history answers a user with theirs (the owner with anyone's).
// Other ranks have none: their requests go up to rank 0.
#pragma once

#include <memory>

#include "broker/accounting/accounting_db.hpp"
#include "broker/broker.hpp"

namespace banyan {

class AccountingService {
  public:
    // Rank 0: opens STATEDIR/accounting.db and registers the methods; other
    // ranks: nothing. Error names the database.
    static Result<std::unique_ptr<AccountingService>> start(Broker& broker);

  private:
    explicit AccountingService(Broker& broker) : broker_(broker) {}
    void on_record(const Message& req);
    void on_history(const Message& req);

    Broker& broker_;
    std::unique_ptr<AccountingDb> db_;
};

}  // namespace banyan
