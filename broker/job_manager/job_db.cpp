#include "broker/job_manager/job_db.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/json_parse.hpp"
#include "core/log.hpp"

namespace banyan {
namespace {

constexpr auto kRetryDelay = std::chrono::milliseconds(100);

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (id INTEGER PRIMARY KEY, userid INTEGER NOT NULL,
                                 t_submit REAL NOT NULL, jobspec TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (id INTEGER NOT NULL, seq INTEGER NOT NULL, timestamp REAL NOT NULL,
                                   name TEXT NOT NULL, context TEXT NOT NULL,
                                   PRIMARY KEY (id, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS signatures (id INTEGER PRIMARY KEY, credential TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS output (id INTEGER NOT NULL, seq INTEGER NOT NULL, rank INTEGER NOT NULL,
                                   stream TEXT NOT NULL, data BLOB NOT NULL,
                                   PRIMARY KEY (id, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS output_sources (id INTEGER NOT NULL, rank INTEGER NOT NULL,
                                           incarnation INTEGER NOT NULL, last INTEGER NOT NULL,
                                           PRIMARY KEY (id, rank, incarnation)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS profiles (id INTEGER NOT NULL, rank INTEGER NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (id, rank));
INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', '1');
)sql";

// A write's rows are none: only whether it ran.
Result<void> ran(const Result<std::vector<SqlRow>>& r) {
    if (!r)
        return r.error();
    return {};
}

Result<JobEvent> event_from_row(const SqlRow& row, size_t first) {
    auto context = parse_json(sql_text(row[first + 2]));
    if (!context)
        return make_error(EIO, "an event's context: " + context.error().message);
    return JobEvent{sql_real(row[first]), sql_text(row[first + 1]), std::move(*context)};
}

}  // namespace

Result<std::unique_ptr<JobDb>> JobDb::open(Reactor& reactor, const std::string& statedir) {
    auto db = open_store(statedir + "/jobs.db", "meta", kSchema, "job database");
    if (!db)
        return db.error();
    return std::unique_ptr<JobDb>(new JobDb(reactor, std::move(db->writer), std::move(db->reader)));
}

JobDb::JobDb(Reactor& reactor, Database writer, Database reader)
    : reactor_(reactor),
      writer_(std::make_unique<DbWorker>(reactor, std::move(writer))),
      reader_(std::make_unique<DbWorker>(reactor, std::move(reader))),
      commit_soon_(reactor),
      retry_(reactor) {}

namespace {

// One transaction: every write of the batch, or none.
template <class Writes>
Result<void> commit_batch(Database& db, const Writes& writes, JobId last_id) {
    if (auto r = db.exec("BEGIN"); !r)
        return r.error();
    auto fail = [&db](const Error& e) -> Result<void> {
        (void)db.exec("ROLLBACK");
        return e;
    };
    for (const auto& write : writes)
        if (auto r = write.apply(db); !r)
            return fail(r.error());
    // The largest id ever issued outlives the purge of its job: once per
    // commit, not per job.
    if (last_id > 0)
        if (auto r =
                db.query("INSERT OR REPLACE INTO meta (key, value) VALUES ('last_id', ?)", {std::to_string(last_id)});
            !r)
            return fail(r.error());
    if (auto r = db.exec("COMMIT"); !r)
        return fail(r.error());
    return {};
}

}  // namespace

JobDb::~JobDb() {
    // What was queued is committed before the threads stop, after the
    // batch the writer may still be committing; if that one failed, its
    // writes go first in this last try (a job's events never land without
    // the job).
    if (committing_) {
        writer_->run_and_wait([](Database&) { return 0; });
        if (!committing_->committed) {
            for (auto& w : queued_.writes)
                committing_->writes.push_back(std::move(w));
            queued_.writes = std::move(committing_->writes);
        }
    }
    if (!queued_.writes.empty() || last_id_ > last_id_stored_) {
        auto writes = std::make_shared<std::vector<Write>>(std::move(queued_.writes));
        JobId last_id = last_id_ > last_id_stored_ ? last_id_ : 0;
        auto r = writer_->run_and_wait([writes, last_id](Database& db) { return commit_batch(db, *writes, last_id); });
        if (!r)
            log::error("job-db", "{}", r.error().message);
    }
    writer_.reset();
    reader_.reset();
}

void JobDb::add_job(JobId id, uint32_t userid, double t_submit, const std::string& jobspec,
                    const std::string& signature) {
    last_id_ = std::max(last_id_, id);
    queue({id, true, [=](Database& db) -> Result<void> {
               if (auto r = ran(db.query("INSERT INTO jobs (id, userid, t_submit, jobspec) VALUES (?, ?, ?, ?)",
                                         {static_cast<int64_t>(id), static_cast<int64_t>(userid), t_submit, jobspec}));
                   !r || signature.empty())
                   return r;
               return ran(db.query("INSERT INTO signatures (id, credential) VALUES (?, ?)",
                                   {static_cast<int64_t>(id), signature}));
           }});
}

void JobDb::add_event(JobId id, uint32_t seq, const JobEvent& event) {
    queue({id, false, [id, seq, ts = event.timestamp, name = event.name, context = event.context.dump()](Database& db) {
               return ran(db.query("INSERT INTO events (id, seq, timestamp, name, context) VALUES (?, ?, ?, ?, ?)",
                                   {static_cast<int64_t>(id), static_cast<int64_t>(seq), ts, name, context}));
           }});
}

void JobDb::add_output(JobId id, const OutputChunk& chunk) {
    queue({id, false, [id, chunk](Database& db) {
               return ran(db.query("INSERT INTO output (id, seq, rank, stream, data) VALUES (?, ?, ?, ?, ?)",
                                   {static_cast<int64_t>(id), static_cast<int64_t>(chunk.seq),
                                    static_cast<int64_t>(chunk.rank), chunk.stream, chunk.data}));
           }});
}

void JobDb::set_output_source(JobId id, const OutputSource& source) {
    queue({id, false, [id, source](Database& db) {
               return ran(
                   db.query("INSERT OR REPLACE INTO output_sources (id, rank, incarnation, last) "
                            "VALUES (?, ?, ?, ?)",
                            {static_cast<int64_t>(id), static_cast<int64_t>(source.rank),
                             static_cast<int64_t>(source.incarnation), static_cast<int64_t>(source.last)}));
           }});
}

void JobDb::add_profile(JobId id, int64_t rank, std::string data) {
    queue({id, false, [id, rank, data = std::move(data)](Database& db) {
               return ran(db.query("INSERT OR REPLACE INTO profiles (id, rank, data) VALUES (?, ?, ?)",
                                   {static_cast<int64_t>(id), rank, data}));
           }});
}

void JobDb::remove_profiles(JobId id) {
    queue({id, false, [id](Database& db) {
               return ran(db.query("DELETE FROM profiles WHERE id = ?", {static_cast<int64_t>(id)}));
           }});
}

void JobDb::remove_job(JobId id) {
    queue({id, false, [id](Database& db) -> Result<void> {
               for (const char* sql : {"DELETE FROM jobs WHERE id = ?", "DELETE FROM events WHERE id = ?",
                                       "DELETE FROM output WHERE id = ?", "DELETE FROM signatures WHERE id = ?",
                                       "DELETE FROM profiles WHERE id = ?", "DELETE FROM output_sources WHERE id = ?"})
                   if (auto r = db.query(sql, {static_cast<int64_t>(id)}); !r)
                       return r.error();
               return {};
           }});
}

void JobDb::queue(Write write) {
    if (queued_.writes.empty())
        queued_.first_write = Clock::now();
    queued_.writes.push_back(std::move(write));
    // The writes of this loop turn go together; while a commit (its
    // fdatasync) is under way, the next batch gathers everything that
    // comes meanwhile: one sync per batch, and a lone write waits for none.
    if (!committing_ && !commit_soon_.active() && !retry_.active())
        commit_soon_.start(Duration::zero(), [this] { commit_next(); });
}

void JobDb::after_commit(std::function<void()> fn) {
    if (!queued_.writes.empty())
        queued_.waiters.push_back(std::move(fn));
    else if (committing_)
        committing_->waiters.push_back(std::move(fn));
    else
        reactor_.post(std::move(fn));
}

void JobDb::commit_next() {
    if (committing_ || (queued_.writes.empty() && !failing_))
        return;
    if (queued_.writes.empty()) {
        // Failing, and nothing left to write (the jobs were dropped): a
        // write of its own tells when the disk takes writes again.
        queued_.writes.push_back({0, false, [](Database& db) {
                                      return ran(
                                          db.query("INSERT OR REPLACE INTO meta (key, value) VALUES "
                                                   "('written', strftime('%s', 'now'))"));
                                  }});
    }
    committing_ = std::make_shared<Batch>(std::exchange(queued_, {}));
    if (last_id_ > last_id_stored_)
        committing_->last_id = last_id_;
    writer_->run(
        [batch = committing_](Database& db) {
            auto r = commit_batch(db, batch->writes, batch->last_id);
            batch->committed = r.ok();
            return r;
        },
        [this, batch = committing_](const Result<void>& r) { on_committed(batch, r); });
}

void JobDb::on_committed(std::shared_ptr<Batch> batch, const Result<void>& r) {
    committing_.reset();
    if (!r) {
        on_commit_failed(*batch, r.error());
        return;
    }
    if (failing_) {
        log::info("job-db", "commits land again after {:.1f} s of failing",
                  std::chrono::duration<double>(Clock::now() - failing_since_).count());
        failing_.reset();
    }
    commits_++;
    commit_latency_.observe(std::chrono::duration<double>(Clock::now() - batch->first_write).count());
    last_id_stored_ = std::max(last_id_stored_, batch->last_id);
    // What gathered meanwhile goes to the writer before the waiters run:
    // what they write goes in the batch after.
    commit_next();
    for (auto& fn : batch->waiters)
        fn();
    if (on_commit_)
        on_commit_();
}

// Nothing waiting is released: an answer goes out only once its write is
// on disk. The jobs the batch would have created are dropped (their
// submissions are refused at once, not kept waiting for the disk); the
// rest goes back in front of what came since and is tried again soon.
void JobDb::on_commit_failed(Batch& batch, const Error& error) {
    auto now = Clock::now();
    if (!failing_) {
        failing_since_ = now;
        failure_logged_ = {};
    }
    failing_ = error;
    if (now - failure_logged_ >= std::chrono::seconds(10)) {  // not ten lines a second
        log::error("job-db", "commit failed (retrying every {} ms until it lands): {}", kRetryDelay.count(),
                   error.message);
        failure_logged_ = now;
    }
    std::vector<JobId> dropped;
    for (const auto& w : batch.writes)
        if (w.creates)
            dropped.push_back(w.job);
    for (auto& w : queued_.writes)
        batch.writes.push_back(std::move(w));
    for (auto& fn : queued_.waiters)
        batch.waiters.push_back(std::move(fn));
    if (!dropped.empty())
        std::erase_if(batch.writes, [&](const Write& w) {
            return std::find(dropped.begin(), dropped.end(), w.job) != dropped.end();
        });
    queued_ = {std::move(batch.writes), std::move(batch.waiters), 0, false, batch.first_write};
    retry_.start(kRetryDelay, [this] { commit_next(); });
    if (!dropped.empty() && on_dropped_)
        on_dropped_(dropped, error);
}

Result<std::vector<StoredJob>> JobDbReader::load_all() {
    auto jobs = db_.query("SELECT id, userid, t_submit, jobspec FROM jobs ORDER BY id");
    if (!jobs)
        return jobs.error();
    std::vector<StoredJob> out;
    out.reserve(jobs->size());
    for (auto& row : *jobs)
        out.push_back({static_cast<JobId>(sql_int(row[0])),
                       static_cast<uint32_t>(sql_int(row[1])),
                       sql_real(row[2]),
                       sql_text(row[3]),
                       {}});
    // Each table's rows, ordered by job id, go to their jobs in one pass;
    // those of a job whose row is gone are left for purge.
    auto to_jobs = [this, &out](std::string_view sql, auto take) -> Result<void> {
        auto rows = db_.query(sql);
        if (!rows)
            return rows.error();
        size_t j = 0;
        for (auto& row : *rows) {
            auto id = static_cast<JobId>(sql_int(row[0]));
            while (j < out.size() && out[j].id < id)
                j++;
            if (j < out.size() && out[j].id == id)
                if (auto r = take(out[j], row); !r)
                    return make_error(EIO,
                                      fmt::format("{}: job {}: {}", db_.path(), format_jobid(id), r.error().message));
        }
        return {};
    };
    auto events = to_jobs("SELECT id, timestamp, name, context FROM events ORDER BY id, seq",
                          [](StoredJob& job, const SqlRow& row) -> Result<void> {
                              auto ev = event_from_row(row, 1);
                              if (!ev)
                                  return ev.error();
                              job.events.push_back(std::move(*ev));
                              return {};
                          });
    // Output goes on after what is stored (a shell that outlived rank 0
    // writes more), and counts toward the limit.
    auto output = to_jobs("SELECT id, MAX(seq), SUM(LENGTH(CAST(data AS BLOB))) FROM output GROUP BY id ORDER BY id",
                          [](StoredJob& job, const SqlRow& row) -> Result<void> {
                              job.next_output_seq = static_cast<uint32_t>(sql_int(row[1]) + 1);
                              job.output_bytes = static_cast<uint64_t>(sql_int(row[2]));
                              return {};
                          });
    auto sources = to_jobs("SELECT id, rank, incarnation, last FROM output_sources ORDER BY id",
                           [](StoredJob& job, const SqlRow& row) -> Result<void> {
                               job.output_sources.push_back({static_cast<uint32_t>(sql_int(row[1])),
                                                             static_cast<uint64_t>(sql_int(row[2])),
                                                             static_cast<uint64_t>(sql_int(row[3]))});
                               return {};
                           });
    if (auto e = first_error(events, output, sources))
        return *e;
    return out;
}

Result<std::vector<JobEvent>> JobDbReader::events(JobId id, uint32_t from_seq) {
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

Result<std::vector<OutputChunk>> JobDbReader::output(JobId id, uint32_t from_seq, size_t max_bytes) {
    // Rows are read a bounded batch at a time when the answer is bounded.
    int64_t max_rows = max_bytes == SIZE_MAX ? -1 : 4096;
    auto rows = db_.query("SELECT seq, rank, stream, data FROM output WHERE id = ? AND seq >= ? ORDER BY seq LIMIT ?",
                          {static_cast<int64_t>(id), static_cast<int64_t>(from_seq), max_rows});
    if (!rows)
        return rows.error();
    std::vector<OutputChunk> out;
    size_t bytes = 0;
    for (auto& row : *rows) {
        if (!out.empty() && bytes >= max_bytes)
            break;
        out.push_back({static_cast<uint32_t>(sql_int(row[0])), static_cast<uint32_t>(sql_int(row[1])), sql_text(row[2]),
                       sql_text(row[3])});
        bytes += out.back().data.size();
    }
    return out;
}

Result<std::string> JobDbReader::signature(JobId id) {
    auto rows = db_.query("SELECT credential FROM signatures WHERE id = ?", {static_cast<int64_t>(id)});
    if (!rows)
        return rows.error();
    return rows->empty() ? std::string() : sql_text((*rows)[0][0]);
}

Result<std::vector<std::pair<int64_t, std::string>>> JobDbReader::profiles(JobId id) {
    auto rows = db_.query("SELECT rank, data FROM profiles WHERE id = ? ORDER BY rank", {static_cast<int64_t>(id)});
    if (!rows)
        return rows.error();
    std::vector<std::pair<int64_t, std::string>> out;
    for (const auto& row : *rows)
        out.emplace_back(sql_int(row[0]), sql_text(row[1]));
    return out;
}

Result<std::string> JobDbReader::jobspec(JobId id) {
    auto rows = db_.query("SELECT jobspec FROM jobs WHERE id = ?", {static_cast<int64_t>(id)});
    if (!rows)
        return rows.error();
    if (rows->empty())
        return make_error(ENOENT, fmt::format("job {} is not in the database", format_jobid(id)));
    return sql_text((*rows)[0][0]);
}

Result<JobId> JobDbReader::max_id() {
    auto rows = db_.query("SELECT value FROM meta WHERE key = 'last_id'");
    if (!rows)
        return rows.error();
    if (rows->empty())
        return JobId{0};
    return parse_jobid(sql_text((*rows)[0][0]));
}

}  // namespace banyan
