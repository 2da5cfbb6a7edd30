#include "broker/job_manager/job_db.hpp"

#include <fmt/format.h>

#include "core/json_parse.hpp"
#include "core/log.hpp"

namespace banyan {
namespace {

constexpr auto kCommitDelay = std::chrono::milliseconds(2);
constexpr auto kRetryDelay = std::chrono::milliseconds(100);
constexpr size_t kCommitAtOnce = 4096;

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (id INTEGER PRIMARY KEY, userid INTEGER NOT NULL,
                                 t_submit REAL NOT NULL, jobspec TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (id INTEGER NOT NULL, seq INTEGER NOT NULL, timestamp REAL NOT NULL,
                                   name TEXT NOT NULL, context TEXT NOT NULL,
                                   PRIMARY KEY (id, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS output (id INTEGER NOT NULL, seq INTEGER NOT NULL, rank INTEGER NOT NULL,
                                   stream TEXT NOT NULL, data BLOB NOT NULL,
                                   PRIMARY KEY (id, seq)) WITHOUT ROWID;
INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', '1');
)sql";

int64_t as_int(const SqlValue& v) { return std::holds_alternative<int64_t>(v) ? std::get<int64_t>(v) : 0; }
double as_real(const SqlValue& v) {
    return std::holds_alternative<double>(v) ? std::get<double>(v) : static_cast<double>(as_int(v));
}
// A write's rows are none: only whether it ran.
Result<void> ran(const Result<std::vector<SqlRow>>& r) {
    if (!r)
        return r.error();
    return {};
}
std::string as_text(const SqlValue& v) { return std::holds_alternative<std::string>(v) ? std::get<std::string>(v) : ""; }

Result<JobEvent> event_from_row(const SqlRow& row, size_t first) {
    auto context = parse_json(as_text(row[first + 2]));
    if (!context)
        return make_error(EIO, "an event's context: " + context.error().message);
    return JobEvent{as_real(row[first]), as_text(row[first + 1]), std::move(*context)};
}

}  // namespace

Result<std::unique_ptr<JobDb>> JobDb::open(Reactor& reactor, const std::string& statedir) {
    auto db = Database::open(statedir + "/jobs.db");
    if (!db)
        return db.error();
    // FULL: a commit survives the machine crashing, not just the process.
    if (auto r = db->exec("PRAGMA synchronous=FULL;"); !r)
        return r.error();
    if (auto r = db->exec(kSchema); !r)
        return r.error();
    auto version = db->query("SELECT value FROM meta WHERE key = 'schema_version'");
    if (!version)
        return version.error();
    if (version->empty() || as_text((*version)[0][0]) != "1")
        return make_error(EINVAL, fmt::format("{}: job database schema version {} (this broker reads version 1)",
                                              db->path(), version->empty() ? "?" : as_text((*version)[0][0])));
    return std::unique_ptr<JobDb>(new JobDb(reactor, std::move(*db)));
}

JobDb::~JobDb() {
    if (auto r = flush(); !r)
        log::error("job-db", "{}", r.error().message);
}

void JobDb::add_job(JobId id, uint32_t userid, double t_submit, const std::string& jobspec) {
    last_id_ = std::max(last_id_, id);
    queue([=](Database& db) -> Result<void> {
        return ran(db.query("INSERT INTO jobs (id, userid, t_submit, jobspec) VALUES (?, ?, ?, ?)",
                   {static_cast<int64_t>(id), static_cast<int64_t>(userid), t_submit, jobspec}));
    });
}

void JobDb::add_event(JobId id, uint32_t seq, const JobEvent& event) {
    queue([id, seq, ts = event.timestamp, name = event.name, context = event.context.dump()](Database& db) {
        return ran(db.query("INSERT INTO events (id, seq, timestamp, name, context) VALUES (?, ?, ?, ?, ?)",
                   {static_cast<int64_t>(id), static_cast<int64_t>(seq), ts, name, context}));
    });
}

void JobDb::add_output(JobId id, const OutputChunk& chunk) {
    queue([id, chunk](Database& db) {
        return ran(db.query("INSERT INTO output (id, seq, rank, stream, data) VALUES (?, ?, ?, ?, ?)",
                   {static_cast<int64_t>(id), static_cast<int64_t>(chunk.seq), static_cast<int64_t>(chunk.rank),
                    chunk.stream, chunk.data}));
    });
}

void JobDb::remove_job(JobId id) {
    queue([id](Database& db) -> Result<void> {
        for (const char* sql : {"DELETE FROM jobs WHERE id = ?", "DELETE FROM events WHERE id = ?",
                                "DELETE FROM output WHERE id = ?"})
            if (auto r = db.query(sql, {static_cast<int64_t>(id)}); !r)
                return r.error();
        return {};
    });
}

void JobDb::queue(Write write) {
    writes_.push_back(std::move(write));
    if (writes_.size() >= kCommitAtOnce)
        timer_.start(Duration::zero(), [this] { commit_now(); });
    else if (!timer_.active())
        // At most one commit (one fdatasync) per kCommitDelay: under load
        // the writes of that time share it, and a lone write (one user's
        // one job) is not kept waiting.
        timer_.start(std::max(last_commit_ + kCommitDelay - Clock::now(), Duration::zero()), [this] { commit_now(); });
}

void JobDb::after_commit(std::function<void()> fn) {
    if (writes_.empty())
        reactor_.post(std::move(fn));
    else
        waiters_.push_back(std::move(fn));
}

Result<void> JobDb::flush() {
    if (writes_.empty())
        return {};
    if (auto r = db_.exec("BEGIN"); !r)
        return r.error();
    for (auto& write : writes_) {
        if (auto r = write(db_); !r) {
            (void)db_.exec("ROLLBACK");
            return r.error();
        }
    }
    // The largest id ever issued outlives the purge of its job: once per
    // commit, not per job.
    if (last_id_ > last_id_stored_) {
        if (auto r = db_.query("INSERT OR REPLACE INTO meta (key, value) VALUES ('last_id', ?)",
                               {std::to_string(last_id_)});
            !r) {
            (void)db_.exec("ROLLBACK");
            return r.error();
        }
    }
    if (auto r = db_.exec("COMMIT"); !r) {
        (void)db_.exec("ROLLBACK");
        return r.error();
    }
    writes_.clear();
    last_id_stored_ = last_id_;
    commits_++;
    last_commit_ = Clock::now();
    return {};
}

void JobDb::commit_now() {
    if (auto r = flush(); !r) {
        // Nothing waiting is released: a submission is answered only once
        // it is on disk. Try again soon.
        log::error("job-db", "commit failed (retrying): {}", r.error().message);
        timer_.start(kRetryDelay, [this] { commit_now(); });
        return;
    }
    for (auto& fn : std::exchange(waiters_, {}))
        fn();
    if (on_commit_)
        on_commit_();
}

Result<std::vector<StoredJob>> JobDb::load_all() {
    auto jobs = db_.query("SELECT id, userid, t_submit, jobspec FROM jobs ORDER BY id");
    if (!jobs)
        return jobs.error();
    std::vector<StoredJob> out;
    out.reserve(jobs->size());
    for (auto& row : *jobs)
        out.push_back({static_cast<JobId>(as_int(row[0])), static_cast<uint32_t>(as_int(row[1])), as_real(row[2]),
                       as_text(row[3]), {}});
    auto events = db_.query("SELECT id, timestamp, name, context FROM events ORDER BY id, seq");
    if (!events)
        return events.error();
    size_t j = 0;
    for (auto& row : *events) {
        auto id = static_cast<JobId>(as_int(row[0]));
        while (j < out.size() && out[j].id < id)
            j++;
        if (j == out.size() || out[j].id != id)
            continue;  // events of a job whose row is gone: left for purge
        auto ev = event_from_row(row, 1);
        if (!ev)
            return make_error(EIO, fmt::format("{}: job {}: {}", db_.path(), format_jobid(id), ev.error().message));
        out[j].events.push_back(std::move(*ev));
    }
    return out;
}

Result<std::vector<JobEvent>> JobDb::events(JobId id, uint32_t from_seq) {
    auto rows = db_.query("SELECT timestamp, name, context FROM events WHERE id = ? AND seq >= ? ORDER BY seq",
                          {static_cast<int64_t>(id), static_cast<int64_t>(from_seq)});
    if (!rows)
        return rows.error();
    std::vector<JobEvent> out;
    for (auto& row : *rows) {
        auto ev = event_from_row(row, 0);
        if (!ev)
            return ev.error();
        out.push_back(std::move(*ev));
    }
    return out;
}

Result<std::vector<OutputChunk>> JobDb::output(JobId id, uint32_t from_seq, size_t max_bytes) {
    // Rows are read a bounded batch at a time when the answer is bounded.
    int64_t max_rows = max_bytes == SIZE_MAX ? -1 : 4096;
    auto rows =
        db_.query("SELECT seq, rank, stream, data FROM output WHERE id = ? AND seq >= ? ORDER BY seq LIMIT ?",
                  {static_cast<int64_t>(id), static_cast<int64_t>(from_seq), max_rows});
    if (!rows)
        return rows.error();
    std::vector<OutputChunk> out;
    size_t bytes = 0;
    for (auto& row : *rows) {
        if (!out.empty() && bytes >= max_bytes)
            break;
        out.push_back({static_cast<uint32_t>(as_int(row[0])), static_cast<uint32_t>(as_int(row[1])),
                       as_text(row[2]), as_text(row[3])});
        bytes += out.back().data.size();
    }
    return out;
}

Result<std::string> JobDb::jobspec(JobId id) {
    auto rows = db_.query("SELECT jobspec FROM jobs WHERE id = ?", {static_cast<int64_t>(id)});
    if (!rows)
        return rows.error();
    if (rows->empty())
        return make_error(ENOENT, fmt::format("job {} is not in the database", format_jobid(id)));
    return as_text((*rows)[0][0]);
}

Result<JobId> JobDb::max_id() {
    auto rows = db_.query("SELECT value FROM meta WHERE key = 'last_id'");
    if (!rows)
        return rows.error();
    if (rows->empty())
        return JobId{0};
    return parse_jobid(as_text((*rows)[0][0]));
}

}  // namespace banyan
