// AccountingDb: the accounting store at rank 0 (doc/spec/accounting.md
// §3), STATEDIR/accounting.db: one usage record per job, kept for years.
// The loop never touches the disk: records are committed on a writer
// thread, together when they come together, and histories are read on a
// reader thread; results come back as callbacks on the loop.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/db_worker.hpp"
#include "core/reactor.hpp"
#include "core/result.hpp"
#include "sched/banks.hpp"

namespace banyan {

// accounting.md §2.
struct UsageRecord {
    uint64_t id = 0;
    uint32_t userid = 0;
    std::string name;
    std::string queue;
    std::string bank;  // "": none (accounting.md §5)
    std::string result;
    std::optional<int64_t> status;
    std::string exception;
    double t_submit = 0, t_eligible = 0, t_start = 0, t_end = 0;
    double time_limit = 0;
    uint32_t nnodes = 0;
    std::string nodelist;
    uint32_t ncores = 0, ngpus = 0;
    double cpu = 0;
    uint64_t maxrss = 0, totalrss = 0;

    double elapsed() const { return t_start > 0 && t_end > t_start ? t_end - t_start : 0; }
    double gpu_seconds() const { return ngpus * elapsed(); }
    nlohmann::json to_json() const;
    // completed, failed, canceled or timeout.
    static bool known_result(std::string_view result);
    // As accounting.record sends it (accounting.md §4): the fields of
    // kRowColumns, in that order, in an array. from_row: an Error EPROTO
    // naming the first column of another type.
    static constexpr std::array<std::string_view, 20> kRowColumns = {
        "id",        "userid",   "bank",       "name",    "queue",  "result",     "status",
        "exception", "t_submit", "t_eligible", "t_start", "t_end",  "time_limit", "nnodes",
        "nodelist",  "ncores",   "ngpus",      "cpu",     "maxrss", "totalrss"};
    nlohmann::json to_row() const;
    static Result<UsageRecord> from_row(const nlohmann::json& row);
};

// Which records accounting.history answers with.
struct HistoryFilter {
    std::optional<uint32_t> userid;    // none: every user's
    double since = 0;                  // t_end at or after; 0: from the first
    double until = 0;                  // t_end before; 0: to the last
    std::vector<std::string> results;  // empty: any; each known_result() once
    std::string name;                  // "": any
    std::string bank;                  // "": any
    std::string node;                  // "": any; else jobs that ran on this host
    uint64_t id = 0;                   // 0: any; else that job's record
    uint64_t count = 1000;
};

// What one user's jobs charged to one bank used in a window
// (accounting.usage).
struct UsageRow {
    uint32_t userid = 0;
    std::string bank;
    uint64_t jobs = 0;
    double core_seconds = 0;
    double gpu_seconds = 0;
    double cpu = 0;
};

// Core-seconds of one association's jobs that ended around `t_end`.
struct UsageSum {
    uint32_t userid = 0;
    std::string bank;
    double t_end = 0;
    double core_seconds = 0;
};

// One change of the bank tables, written in one transaction: a bank's
// row (written, or removed when `row` is empty) and/or every association
// of one user (theirs replaced by `rows`).
struct BankChange {
    std::optional<std::string> bank;
    std::optional<Bank> row;
    std::optional<uint32_t> userid;
    std::vector<Association> rows;
};

// [accounting]: where the store is, and this cluster's name in it.
struct StoreConfig {
    std::string database;  // "": STATEDIR/accounting.db; else postgresql://...
    std::string cluster;   // names this cluster's records in a shared store
};

class AccountingDb {
  public:
    // Opens (creating) STATEDIR/accounting.db, or connects to the
    // PostgreSQL store `config` names (an unreachable one is said so and
    // used once it can be). Error names the file or server and why.
    // Every descriptor either opens is close-on-exec: sqlite's files
    // (Database::open) and the PostgreSQL connections' sockets
    // (PostgresStore); 2005 and 2007 check all of rank 0's.
    static Result<std::unique_ptr<AccountingDb>> open(Reactor& reactor, const std::string& statedir,
                                                      const StoreConfig& config = {});
    // Other clusters write to it too (PostgreSQL): banks and usage are
    // read again at each computation.
    bool shared() const { return shared_; }
    // Commits what is queued (waiting for it), then stops both threads.
    ~AccountingDb();

    // Stores `records` (an id stored already is left as it is) and runs
    // `done` on the loop once they are committed: within 100 ms, as commits
    // are paced (each is synced to disk, beside the job database's). A commit that fails (a
    // full disk) is retried every second until it lands, said once in
    // the log: `done` waits.
    // `done` gets the ids newly stored (not those stored before).
    void add(std::vector<UsageRecord> records, std::function<void(const std::unordered_set<uint64_t>&)> done);
    // The records `filter` selects, newest end first.
    void history(HistoryFilter filter, std::function<void(Result<std::vector<UsageRecord>>)> done);

    // Per user and bank, the jobs that ended in [since, until) (0: no
    // bound), of one user or (none) all.
    void usage(double since, double until, std::optional<uint32_t> userid,
               std::function<void(Result<std::vector<UsageRow>>)> done);

    // At start only (it waits): the bank tables, and the usage of jobs of
    // a bank that ended at or after `since`, summed per association over
    // spans of `span` seconds.
    Result<BankTable> load_banks();
    Result<std::vector<UsageSum>> load_usage(double since, double span);
    // Runs `work` on the reader thread, off the loop; `done` on the loop.
    template <class Work, class Done>
    void compute(Work work, Done done) {
        reader_->run([work = std::move(work)](SqlStore&) mutable { return work(); }, std::move(done));
    }
    // The bank tables and load_usage()'s sums, read again (a shared
    // store, where other clusters change them).
    struct Refreshed {
        BankTable banks;
        std::vector<UsageSum> usage;
    };
    void refresh(double since, double span, std::function<void(Result<Refreshed>)> done);
    // Writes one change; `done` on the loop once committed (or not).
    void change_banks(BankChange change, std::function<void(Result<void>)> done);
    // The bank tables as stored once every change queued before is
    // written (to start again from after a failed write).
    void read_banks(std::function<void(Result<BankTable>)> done);

  private:
    struct Batch {
        std::vector<UsageRecord> records;
        std::vector<std::function<void(const std::unordered_set<uint64_t>&)>> waiters;
    };
    using StoreWorker = BasicDbWorker<SqlStore>;
    AccountingDb(Reactor& reactor, std::unique_ptr<SqlStore> writer, std::unique_ptr<SqlStore> reader,
                 std::string cluster, bool shared);
    static Result<std::unique_ptr<AccountingDb>> open_postgres(Reactor& reactor, const StoreConfig& config);
    void commit_next();
    void on_committed(std::shared_ptr<Batch> batch, const Result<std::unordered_set<uint64_t>>& r);

    std::unique_ptr<StoreWorker> writer_;
    std::unique_ptr<StoreWorker> reader_;
    Batch queued_;
    std::shared_ptr<Batch> committing_;
    Timer retry_;
    Timer pace_;  // the next commit, kCommitInterval after the last began
    Clock::time_point last_commit_{};
    bool failing_ = false;
    std::string cluster_;
    bool shared_ = false;
};

}  // namespace banyan
