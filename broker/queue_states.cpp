#include "broker/queue_states.hpp"

#include <fmt/format.h>

#include "core/duration.hpp"

namespace banyan {

namespace {
const char* kind_name(QueueStates::Kind kind) {
    return kind == QueueStates::Kind::disabled ? "disabled" : "stopped";
}
}  // namespace

QueueStates::QueueStates(Reactor& reactor, Database db, Kind kind) : db_(reactor, std::move(db)), kind_(kind) {}

Result<std::unique_ptr<QueueStates>> QueueStates::open(Reactor& reactor, const std::string& statedir, Kind kind,
                                                       std::map<std::string, std::string>& loaded) {
    // Close-on-exec, as every descriptor (DESIGN.md, Security):
    // Database::open has sqlite open the file, its -wal and -shm with
    // O_CLOEXEC and marks any it finds without (core/sqlite.hpp).
    auto db = Database::open(statedir + "/queues.db", "queue_state");
    if (!db)
        return db.error();
    if (auto r = db->exec("CREATE TABLE IF NOT EXISTS queue_state (queue TEXT NOT NULL, kind TEXT NOT NULL, "
                          "reason TEXT NOT NULL, timestamp REAL NOT NULL, PRIMARY KEY (queue, kind))");
        !r)
        return r.error();
    auto rows = db->query("SELECT queue, reason FROM queue_state WHERE kind = ?", {std::string(kind_name(kind))});
    if (!rows)
        return rows.error();
    for (const auto& row : *rows)
        if (const auto* queue = std::get_if<std::string>(&row[0]))
            if (const auto* reason = std::get_if<std::string>(&row[1]))
                loaded[*queue] = *reason;
    return std::unique_ptr<QueueStates>(new QueueStates(reactor, std::move(*db), kind));
}

void QueueStates::store(std::vector<std::string> queues, std::optional<std::string> reason,
                        std::function<void(const Result<void>&)> done) {
    db_.run(
        [queues = std::move(queues), reason = std::move(reason), kind = std::string(kind_name(kind_)),
         when = wall_now()](Database& db) -> Result<void> {
            std::vector<std::pair<std::string_view, std::vector<SqlValue>>> statements;
            for (const auto& queue : queues)
                if (reason)
                    statements.push_back(
                        {"INSERT OR REPLACE INTO queue_state VALUES (?, ?, ?, ?)", {queue, kind, *reason, when}});
                else
                    statements.push_back({"DELETE FROM queue_state WHERE queue = ? AND kind = ?", {queue, kind}});
            return run_all_or_none(db, statements);
        },
        std::move(done));
}

}  // namespace banyan
