#include "broker/accounting/accounting_db.hpp"

#include <cmath>
#include <filesystem>
#include <unordered_set>

#include <fmt/format.h>

#include "core/json_field.hpp"
#include "core/json_parse.hpp"
#include "broker/accounting/postgres_store.hpp"
#include "core/hostlist.hpp"
#include "core/log.hpp"

namespace banyan {
namespace {

constexpr auto kRetryDelay = std::chrono::seconds(1);
// At most ten commits a second: each is an fsync on the disk the job
// database syncs its own on, and a record waits for nothing but its purge.
constexpr auto kCommitInterval = std::chrono::milliseconds(100);

// One schema for both stores, written twice for their types: sqlite keys
// a record by its id (one cluster a file); PostgreSQL by cluster and id
// (several clusters' records in one store).
constexpr const char* kSqliteSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS usage (id INTEGER PRIMARY KEY, userid INTEGER NOT NULL, name TEXT NOT NULL,
                                  queue TEXT NOT NULL, result TEXT NOT NULL, status INTEGER,
                                  exception TEXT NOT NULL, t_submit REAL NOT NULL, t_eligible REAL NOT NULL,
                                  t_start REAL NOT NULL, t_end REAL NOT NULL, time_limit REAL NOT NULL,
                                  nnodes INTEGER NOT NULL, nodelist TEXT NOT NULL, ncores INTEGER NOT NULL,
                                  ngpus INTEGER NOT NULL, cpu REAL NOT NULL, maxrss INTEGER NOT NULL,
                                  totalrss INTEGER NOT NULL, bank TEXT NOT NULL DEFAULT '',
                                  cluster TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS usage_by_user ON usage (userid, t_end);
CREATE INDEX IF NOT EXISTS usage_by_end ON usage (t_end);
CREATE TABLE IF NOT EXISTS banks (name TEXT PRIMARY KEY, parent TEXT NOT NULL, shares INTEGER NOT NULL,
                                  limits TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS associations (userid INTEGER NOT NULL, bank TEXT NOT NULL, is_default INTEGER NOT NULL,
                                         shares INTEGER NOT NULL, limits TEXT NOT NULL, PRIMARY KEY (userid, bank));
INSERT INTO meta (key, value) VALUES ('schema_version', '2') ON CONFLICT DO NOTHING;
)sql";
constexpr const char* kPostgresSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS usage (id BIGINT NOT NULL, userid BIGINT NOT NULL, name TEXT NOT NULL,
                                  queue TEXT NOT NULL, result TEXT NOT NULL, status BIGINT,
                                  exception TEXT NOT NULL, t_submit DOUBLE PRECISION NOT NULL,
                                  t_eligible DOUBLE PRECISION NOT NULL, t_start DOUBLE PRECISION NOT NULL,
                                  t_end DOUBLE PRECISION NOT NULL, time_limit DOUBLE PRECISION NOT NULL,
                                  nnodes BIGINT NOT NULL, nodelist TEXT NOT NULL, ncores BIGINT NOT NULL,
                                  ngpus BIGINT NOT NULL, cpu DOUBLE PRECISION NOT NULL, maxrss BIGINT NOT NULL,
                                  totalrss BIGINT NOT NULL, bank TEXT NOT NULL DEFAULT '',
                                  cluster TEXT NOT NULL DEFAULT '', PRIMARY KEY (cluster, id));
CREATE INDEX IF NOT EXISTS usage_by_user ON usage (userid, t_end);
CREATE INDEX IF NOT EXISTS usage_by_end ON usage (t_end);
CREATE TABLE IF NOT EXISTS banks (name TEXT PRIMARY KEY, parent TEXT NOT NULL, shares BIGINT NOT NULL,
                                  limits TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS associations (userid BIGINT NOT NULL, bank TEXT NOT NULL, is_default BIGINT NOT NULL,
                                         shares BIGINT NOT NULL, limits TEXT NOT NULL, PRIMARY KEY (userid, bank));
INSERT INTO meta (key, value) VALUES ('schema_version', '2') ON CONFLICT DO NOTHING;
)sql";
constexpr std::string_view kSchemaVersion = "2";

// Version 1 (usage records only) gains the job's bank and cluster; the bank tables
// come with the schema.
Result<void> upgrade_from_v1(const std::string& path) {
    if (!std::filesystem::exists(path))
        return {};
    // O_CLOEXEC: sqlite's unix VFS opens the file, -wal and -shm with it,
    // and Database::open marks each FD_CLOEXEC too (mark_close_on_exec_of).
    auto db = Database::open(path, "usage");  // close-on-exec (O_CLOEXEC), as above
    if (!db)
        return db.error();
    auto version = db->query("SELECT value FROM meta WHERE key = 'schema_version'");
    if (!version || version->empty() || sql_text((*version)[0][0]) != "1")
        return {};  // new, or any other version: open_store says
    return db->exec(
        "BEGIN; ALTER TABLE usage ADD COLUMN bank TEXT NOT NULL DEFAULT ''; "
        "ALTER TABLE usage ADD COLUMN cluster TEXT NOT NULL DEFAULT ''; "
        "UPDATE meta SET value = '2' WHERE key = 'schema_version'; COMMIT;");
}

constexpr const char* kColumns =
    "id, userid, name, queue, result, status, exception, t_submit, t_eligible, t_start, t_end, time_limit, "
    "nnodes, nodelist, ncores, ngpus, cpu, maxrss, totalrss, bank";

UsageRecord record_from_sql_row(const SqlRow& row) {
    UsageRecord r;
    r.id = static_cast<uint64_t>(sql_int(row[0]));
    r.userid = static_cast<uint32_t>(sql_int(row[1]));
    r.name = sql_text(row[2]);
    r.queue = sql_text(row[3]);
    r.result = sql_text(row[4]);
    if (std::holds_alternative<int64_t>(row[5]))
        r.status = std::get<int64_t>(row[5]);
    r.exception = sql_text(row[6]);
    r.t_submit = sql_real(row[7]);
    r.t_eligible = sql_real(row[8]);
    r.t_start = sql_real(row[9]);
    r.t_end = sql_real(row[10]);
    r.time_limit = sql_real(row[11]);
    r.nnodes = static_cast<uint32_t>(sql_int(row[12]));
    r.nodelist = sql_text(row[13]);
    r.ncores = static_cast<uint32_t>(sql_int(row[14]));
    r.ngpus = static_cast<uint32_t>(sql_int(row[15]));
    r.cpu = sql_real(row[16]);
    r.maxrss = static_cast<uint64_t>(sql_int(row[17]));
    r.totalrss = static_cast<uint64_t>(sql_int(row[18]));
    r.bank = sql_text(row[19]);
    return r;
}

// The ids newly stored: one stored already (a record sent again after a
// restart) is left as it is, and not among them.
Result<std::unordered_set<uint64_t>> insert(SqlStore& db, const std::string& cluster,
                                            const std::vector<UsageRecord>& records) {
    if (auto r = db.exec("BEGIN"); !r)
        return r.error();
    std::string sql = fmt::format(
        "INSERT INTO usage ({}, cluster) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
        "?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING id",
        kColumns);
    std::unordered_set<uint64_t> stored;
    for (const auto& u : records) {
        auto r = db.query(sql, {static_cast<int64_t>(u.id), static_cast<int64_t>(u.userid), u.name, u.queue, u.result,
                                u.status ? SqlValue(*u.status) : SqlValue(nullptr), u.exception, u.t_submit,
                                u.t_eligible, u.t_start, u.t_end, u.time_limit, static_cast<int64_t>(u.nnodes),
                                u.nodelist, static_cast<int64_t>(u.ncores), static_cast<int64_t>(u.ngpus), u.cpu,
                                static_cast<int64_t>(u.maxrss), static_cast<int64_t>(u.totalrss), u.bank, cluster});
        if (!r) {
            (void)db.exec("ROLLBACK");
            return r.error();
        }
        if (!r->empty())
            stored.insert(u.id);
    }
    if (auto r = db.exec("COMMIT"); !r) {
        (void)db.exec("ROLLBACK");
        return r.error();
    }
    return stored;
}

Result<std::vector<UsageRecord>> select(SqlStore& db, const std::string& cluster, const HistoryFilter& f) {
    std::string where = "cluster = ?";
    std::vector<SqlValue> params{cluster};
    if (f.userid) {
        where += " AND userid = ?";
        params.emplace_back(static_cast<int64_t>(*f.userid));
    }
    if (f.since > 0) {
        where += " AND t_end >= ?";
        params.emplace_back(f.since);
    }
    if (f.until > 0) {
        where += " AND t_end < ?";
        params.emplace_back(f.until);
    }
    if (!f.name.empty()) {
        where += " AND name = ?";
        params.emplace_back(f.name);
    }
    if (!f.bank.empty()) {
        where += " AND bank = ?";
        params.emplace_back(f.bank);
    }
    if (f.id != 0) {
        where += " AND id = ?";
        params.emplace_back(static_cast<int64_t>(f.id));
    }
    if (!f.results.empty()) {
        where += " AND result IN (?";
        for (size_t i = 1; i < f.results.size(); ++i)
            where += ", ?";
        where += ")";
        for (const auto& r : f.results)
            params.emplace_back(r);
    }
    // A node is found in each record's host list, not in SQL: the rows
    // then come unbounded (within the other filters), newest first, until
    // `count` of them ran there.
    if (f.node.empty())
        params.emplace_back(static_cast<int64_t>(f.count));
    else
        where += " AND nnodes > 0";
    auto rows = db.query(fmt::format("SELECT {} FROM usage WHERE {} ORDER BY t_end DESC, id DESC{}", kColumns, where,
                                     f.node.empty() ? " LIMIT ?" : ""),
                         params);
    if (!rows)
        return rows.error();
    std::vector<UsageRecord> out;
    out.reserve(f.node.empty() ? rows->size() : 0);
    for (const auto& row : *rows) {
        if (out.size() >= f.count)
            break;
        UsageRecord r = record_from_sql_row(row);
        if (!f.node.empty()) {
            auto hosts = HostList::parse(r.nodelist);
            if (!hosts || !hosts->find(f.node))
                continue;
        }
        out.push_back(std::move(r));
    }
    return out;
}

Result<BankTable> select_banks(SqlStore& db) {
    BankTable t;
    auto banks = db.query("SELECT name, parent, shares, limits FROM banks ORDER BY name");
    if (!banks)
        return banks.error();
    auto limits_of = [&db](const SqlValue& text, const std::string& what) -> Result<BankLimits> {
        BankLimits limits;
        auto j = parse_json(sql_text(text));
        if (!j)
            return make_error(EIO, fmt::format("{}: {}: limits: {}", db.path(), what, j.error().message));
        if (auto r = limits.update(*j, what + ".limits"); !r)
            return make_error(EIO, fmt::format("{}: {}", db.path(), r.error().message));
        return limits;
    };
    for (const auto& row : *banks) {
        auto limits = limits_of(row[3], "bank " + sql_text(row[0]));
        if (!limits)
            return limits.error();
        t.banks.push_back({sql_text(row[0]), sql_text(row[1]), sql_int(row[2]), *limits, 0});
    }
    auto users = db.query("SELECT userid, bank, is_default, shares, limits FROM associations ORDER BY userid, bank");
    if (!users)
        return users.error();
    for (const auto& row : *users) {
        auto limits = limits_of(row[4], fmt::format("uid {} in bank {}", sql_int(row[0]), sql_text(row[1])));
        if (!limits)
            return limits.error();
        t.users.push_back({static_cast<uint32_t>(sql_int(row[0])), sql_text(row[1]), sql_int(row[2]) != 0,
                           sql_int(row[3]), *limits, 0, 0});
    }
    return t;
}

Result<void> write_change(SqlStore& db, const BankChange& c) {
    auto run = [&]() -> Result<void> {
        if (c.bank && !c.row) {
            if (auto r = db.query("DELETE FROM banks WHERE name = ?", {*c.bank}); !r)
                return r.error();
        } else if (c.row) {
            if (auto r = db.query("INSERT INTO banks (name, parent, shares, limits) VALUES (?, ?, ?, ?) "
                                  "ON CONFLICT (name) DO UPDATE SET parent = excluded.parent, "
                                  "shares = excluded.shares, limits = excluded.limits",
                                  {c.row->name, c.row->parent, c.row->shares, c.row->limits.to_json().dump()});
                !r)
                return r.error();
        }
        if (c.userid) {
            if (auto r = db.query("DELETE FROM associations WHERE userid = ?", {static_cast<int64_t>(*c.userid)}); !r)
                return r.error();
            for (const auto& a : c.rows)
                if (auto r = db.query("INSERT INTO associations (userid, bank, is_default, shares, limits) "
                                      "VALUES (?, ?, ?, ?, ?)",
                                      {static_cast<int64_t>(a.userid), a.bank, int64_t{a.is_default}, a.shares,
                                       a.limits.to_json().dump()});
                    !r)
                    return r.error();
        }
        return {};
    };
    if (auto r = db.exec("BEGIN"); !r)
        return r.error();
    if (auto r = run(); !r) {
        (void)db.exec("ROLLBACK");
        return r.error();
    }
    if (auto r = db.exec("COMMIT"); !r) {
        (void)db.exec("ROLLBACK");
        return r.error();
    }
    return {};
}

// Summed in SQL per span, so that a million records come back as a few
// thousand rows; each span counts as ending in its middle. Every
// cluster's records: fair-share is shared where the store is.
Result<std::vector<UsageSum>> select_usage(SqlStore& db, double since, double span) {
    auto rows = db.query(
        "SELECT userid, bank, ROUND(t_end / ? - 0.5) AS span, SUM(ncores * (t_end - t_start)) FROM usage "
        "WHERE bank != '' AND t_start > 0 AND t_end > t_start AND t_end >= ? GROUP BY userid, bank, span",
        {span, since});
    if (!rows)
        return rows.error();
    std::vector<UsageSum> out;
    out.reserve(rows->size());
    for (const auto& row : *rows)
        out.push_back({static_cast<uint32_t>(sql_int(row[0])), sql_text(row[1]), (sql_real(row[2]) + 0.5) * span,
                       sql_real(row[3])});
    return out;
}

}  // namespace

bool UsageRecord::known_result(std::string_view result) {
    return result == "completed" || result == "failed" || result == "canceled" || result == "timeout";
}

nlohmann::json UsageRecord::to_json() const {
    return {{"id", id},
            {"userid", userid},
            {"name", name},
            {"queue", queue},
            {"bank", bank},
            {"result", result},
            {"status", status ? nlohmann::json(*status) : nlohmann::json()},
            {"exception", exception},
            {"t_submit", t_submit},
            {"t_eligible", t_eligible},
            {"t_start", t_start},
            {"t_end", t_end},
            {"time_limit", time_limit},
            {"nnodes", nnodes},
            {"nodelist", nodelist},
            {"ncores", ncores},
            {"ngpus", ngpus},
            {"cpu", cpu},
            {"maxrss", maxrss},
            {"totalrss", totalrss},
            {"elapsed", elapsed()},
            {"gpu_seconds", gpu_seconds()}};
}

nlohmann::json UsageRecord::to_row() const {
    return {id,
            userid,
            bank,
            name,
            queue,
            result,
            status ? nlohmann::json(*status) : nlohmann::json(),
            exception,
            t_submit,
            t_eligible,
            t_start,
            t_end,
            time_limit,
            nnodes,
            nodelist,
            ncores,
            ngpus,
            cpu,
            maxrss,
            totalrss};
}

Result<UsageRecord> UsageRecord::from_row(const nlohmann::json& row) {
    if (!row.is_array() || row.size() != kRowColumns.size())
        return make_error(EPROTO, fmt::format("a record: expected an array of {} values", kRowColumns.size()));
    // Each column in kRowColumns' order, named by it when of another type.
    size_t next = 0;
    auto cell = [&]<class T>(T& into) -> Result<void> {
        size_t i = next++;
        auto v = json_as<T>(row[i], kRowColumns[i]);
        if (!v)
            return make_error(EPROTO, "record." + v.error().message);
        into = std::move(*v);
        return {};
    };
    UsageRecord r;
    nlohmann::json status;
    for (auto step : {cell(r.id),      cell(r.userid), cell(r.bank),       cell(r.name),     cell(r.queue),
                      cell(r.result),  cell(status),   cell(r.exception),  cell(r.t_submit), cell(r.t_eligible),
                      cell(r.t_start), cell(r.t_end),  cell(r.time_limit), cell(r.nnodes),   cell(r.nodelist),
                      cell(r.ncores),  cell(r.ngpus),  cell(r.cpu),        cell(r.maxrss),   cell(r.totalrss)})
        if (!step)
            return step.error();
    if (r.id == 0)
        return make_error(EPROTO, "record.id: expected a job id");
    if (!known_result(r.result))
        return make_error(EPROTO, "record.result: expected completed, failed, canceled or timeout");
    if (!status.is_null()) {
        auto code = json_as<int64_t>(status, "record.status");
        if (!code)
            return code.error();
        r.status = *code;
    }
    return r;
}

Result<std::unique_ptr<AccountingDb>> AccountingDb::open(Reactor& reactor, const std::string& statedir,
                                                        const StoreConfig& config) {
    if (!config.database.empty())
        return open_postgres(reactor, config);
    // synchronous=FULL: a record survives the machine crashing.
    std::string path = statedir + "/accounting.db";
    if (auto r = upgrade_from_v1(path); !r)
        return r.error();
    auto db = open_store(path, "usage", kSqliteSchema, "accounting store", kSchemaVersion);
    if (!db)
        return db.error();
    return std::unique_ptr<AccountingDb>(new AccountingDb(reactor, std::make_unique<Database>(std::move(db->writer)),
                                                          std::make_unique<Database>(std::move(db->reader)),
                                                          config.cluster, false));
}

// Two connections, as for sqlite. A server that cannot be reached now is
// said so, and connected to at the first statement that needs it: rank 0
// starts all the same, and records wait (retried every second).
Result<std::unique_ptr<AccountingDb>> AccountingDb::open_postgres(Reactor& reactor, const StoreConfig& config) {
    auto setup = [](SqlStore& db) -> Result<void> {
        if (auto r = db.exec(kPostgresSchema); !r)
            return r;
        auto found = db.query("SELECT value FROM meta WHERE key = 'schema_version'");
        if (!found)
            return found.error();
        std::string have = found->empty() ? "?" : sql_text((*found)[0][0]);
        if (have != kSchemaVersion)
            return make_error(EINVAL, fmt::format("{}: accounting store schema version {} (this broker reads version {})",
                                                  db.path(), have, kSchemaVersion));
        return {};
    };
    std::unique_ptr<SqlStore> writer, reader;
    if (auto w = PostgresStore::connect(config.database, setup)) {
        writer = std::move(*w);
    } else {
        if (w.error().code == EINVAL)
            return w.error();  // reached, but not a store this broker reads
        log::error("accounting", "the accounting store cannot be reached (records wait until it can): {}",
                   w.error().message);
        writer = PostgresStore::later(config.database, setup);
    }
    reader = PostgresStore::later(config.database, nullptr);
    return std::unique_ptr<AccountingDb>(
        new AccountingDb(reactor, std::move(writer), std::move(reader), config.cluster, true));
}

AccountingDb::AccountingDb(Reactor& reactor, std::unique_ptr<SqlStore> writer, std::unique_ptr<SqlStore> reader,
                           std::string cluster, bool shared)
    : writer_(std::make_unique<StoreWorker>(reactor, std::move(writer))),
      reader_(std::make_unique<StoreWorker>(reactor, std::move(reader))),
      retry_(reactor),
      pace_(reactor),
      cluster_(std::move(cluster)),
      shared_(shared) {}

AccountingDb::~AccountingDb() {
    // What was queued is committed before the threads stop (a clean stop
    // loses no record); `done` callbacks do not run.
    std::vector<UsageRecord> left = std::move(queued_.records);
    if (committing_)
        left.insert(left.end(), committing_->records.begin(), committing_->records.end());
    if (left.empty())
        return;
    try {
        auto r = writer_->run_and_wait([&left, this](SqlStore& db) { return insert(db, cluster_, left); });
        if (!r)
            log::error("accounting", "{} records not stored (rank 0 sends them again at its next start): {}",
                       left.size(), r.error().message);
    } catch (const std::exception& e) {
        log::error("accounting", "{} records not stored (rank 0 sends them again at its next start): {}", left.size(),
                   e.what());
    }
}

void AccountingDb::add(std::vector<UsageRecord> records, std::function<void(const std::unordered_set<uint64_t>&)> done) {
    queued_.records.insert(queued_.records.end(), std::make_move_iterator(records.begin()),
                           std::make_move_iterator(records.end()));
    queued_.waiters.push_back(std::move(done));
    commit_next();
}

void AccountingDb::commit_next() {
    // One commit at a time; what comes meanwhile goes in the next, together.
    if (committing_ || retry_.active() || pace_.active() || queued_.waiters.empty())
        return;
    if (auto since = Clock::now() - last_commit_; since < kCommitInterval) {
        pace_.start(std::chrono::duration_cast<Duration>(kCommitInterval - since), [this] { commit_next(); });
        return;
    }
    last_commit_ = Clock::now();
    committing_ = std::make_shared<Batch>(std::exchange(queued_, {}));
    writer_->run([batch = committing_, cluster = cluster_](SqlStore& db) { return insert(db, cluster, batch->records); },
                 [this, batch = committing_](const Result<std::unordered_set<uint64_t>>& r) {
                     on_committed(batch, r);
                 });
}

void AccountingDb::on_committed(std::shared_ptr<Batch> batch, const Result<std::unordered_set<uint64_t>>& r) {
    committing_.reset();
    if (!r) {
        if (!failing_)
            log::error("accounting", "records cannot be stored, retrying every second: {}", r.error().message);
        failing_ = true;
        // Tried again first, with what came meanwhile after it.
        queued_.records.insert(queued_.records.begin(), batch->records.begin(), batch->records.end());
        queued_.waiters.insert(queued_.waiters.begin(), batch->waiters.begin(), batch->waiters.end());
        retry_.start(kRetryDelay, [this] { commit_next(); });
        return;
    }
    if (failing_)
        log::info("accounting", "records are stored again");
    failing_ = false;
    commit_next();
    for (auto& fn : batch->waiters)
        fn(*r);
}

void AccountingDb::history(HistoryFilter filter, std::function<void(Result<std::vector<UsageRecord>>)> done) {
    reader_->run([filter = std::move(filter), cluster = cluster_](SqlStore& db) { return select(db, cluster, filter); },
                 std::move(done));
}

Result<BankTable> AccountingDb::load_banks() {
    return writer_->run_and_wait([](SqlStore& db) { return select_banks(db); });
}

Result<std::vector<UsageSum>> AccountingDb::load_usage(double since, double span) {
    return reader_->run_and_wait([since, span](SqlStore& db) { return select_usage(db, since, span); });
}

void AccountingDb::refresh(double since, double span, std::function<void(Result<Refreshed>)> done) {
    reader_->run(
        [since, span](SqlStore& db) -> Result<Refreshed> {
            auto banks = select_banks(db);
            if (!banks)
                return banks.error();
            auto usage = select_usage(db, since, span);
            if (!usage)
                return usage.error();
            return Refreshed{std::move(*banks), std::move(*usage)};
        },
        std::move(done));
}

void AccountingDb::usage(double since, double until, std::optional<uint32_t> userid,
                         std::function<void(Result<std::vector<UsageRow>>)> done) {
    reader_->run(
        [since, until, userid, cluster = cluster_](SqlStore& db) -> Result<std::vector<UsageRow>> {
            std::string where = "cluster = ? AND t_end >= ?";
            std::vector<SqlValue> params{cluster, since};
            if (until > 0) {
                where += " AND t_end < ?";
                params.emplace_back(until);
            }
            if (userid) {
                where += " AND userid = ?";
                params.emplace_back(static_cast<int64_t>(*userid));
            }
            auto rows = db.query(fmt::format("SELECT userid, bank, COUNT(*), SUM(ncores * {0}), SUM(ngpus * {0}), "
                                             "SUM(cpu) FROM usage WHERE {1} GROUP BY userid, bank ORDER BY userid, bank",
                                             "(CASE WHEN t_start > 0 AND t_end > t_start THEN t_end - t_start ELSE 0 END)",
                                             where),
                                 params);
            if (!rows)
                return rows.error();
            std::vector<UsageRow> out;
            for (const auto& row : *rows)
                out.push_back({static_cast<uint32_t>(sql_int(row[0])), sql_text(row[1]),
                               static_cast<uint64_t>(sql_int(row[2])), sql_real(row[3]), sql_real(row[4]),
                               sql_real(row[5])});
            return out;
        },
        std::move(done));
}

void AccountingDb::change_banks(BankChange change, std::function<void(Result<void>)> done) {
    writer_->run([change = std::move(change)](SqlStore& db) { return write_change(db, change); }, std::move(done));
}

void AccountingDb::read_banks(std::function<void(Result<BankTable>)> done) {
    // On the writer: after every change queued before it has landed.
    writer_->run([](SqlStore& db) { return select_banks(db); }, std::move(done));
}

}  // namespace banyan
