#include "core/sqlite.hpp"

#include <filesystem>
#include <system_error>

#include <fmt/format.h>
#include <sqlite3.h>

#include "core/descriptors.hpp"
#include "core/private_dir.hpp"

namespace banyan {
void Database::StatementDeleter::operator()(sqlite3_stmt* s) const {
    sqlite3_finalize(s);
}

Result<Database> Database::open(const std::string& path, std::string_view own_table) {
    // Only the owner may read it (jobs' environments and output are in it):
    // 0600 before sqlite creates it with the umask's mode.
    if (auto r = make_private_file(path); !r)
        return r.error();
    Database d;
    d.path_ = path;
    if (sqlite3_open_v2(path.c_str(), &d.db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        nullptr) != SQLITE_OK)
        return d.error("cannot open");
    sqlite3_busy_timeout(d.db_, 5000);
    auto tables = d.query("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
    if (!tables)
        return tables.error();
    std::string names;
    bool ours = tables->empty();
    for (const auto& row : *tables) {
        std::string name = std::holds_alternative<std::string>(row[0]) ? std::get<std::string>(row[0]) : "?";
        ours = ours || name == own_table;
        names += (names.empty() ? "" : ", ") + name;
    }
    if (!ours)
        return make_error(EINVAL, fmt::format("{}: not a Banyan database (its tables: {}); move it away or give "
                                              "another state directory",
                                              path, names));
    if (auto r = d.exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"); !r)
        return r.error();
    // The file, its -wal and -shm, all open now: close-on-exec (sqlite's
    // unix VFS opens them with O_CLOEXEC; made sure of here, where it shows).
    std::error_code ec;
    auto real = std::filesystem::weakly_canonical(path, ec);  // as /proc names it
    mark_close_on_exec_of(ec ? path : real.string());
    return d;
}

Database::Database(Database&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), path_(other.path_), statements_(std::move(other.statements_)) {}

Database& Database::operator=(Database&& other) noexcept {
    if (this != &other) {
        statements_.clear();
        if (db_)
            sqlite3_close(db_);
        db_ = std::exchange(other.db_, nullptr);
        path_ = other.path_;
        statements_ = std::move(other.statements_);
    }
    return *this;
}

Database::~Database() {
    statements_.clear();  // statements are finalized before the handle closes
    if (db_)
        sqlite3_close(db_);
}

Error Database::error(std::string_view what) const {
    return make_error(EIO, fmt::format("{}: {}: {}", path_, what, db_ ? sqlite3_errmsg(db_) : "out of memory"));
}

Result<void> Database::exec(std::string_view sql) {
    char* message = nullptr;
    if (sqlite3_exec(db_, std::string(sql).c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
        std::string text = message ? message : "error";
        sqlite3_free(message);
        return make_error(EIO, fmt::format("{}: {}", path_, text));
    }
    return {};
}

Result<sqlite3_stmt*> Database::prepared(std::string_view sql) {
    auto it = statements_.find(std::string(sql));
    if (it != statements_.end())
        return it->second.get();
    sqlite3_stmt* raw = nullptr;
    if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &raw, nullptr) != SQLITE_OK)
        return error("prepare");
    return statements_.emplace(std::string(sql), Statement(raw)).first->second.get();
}

Result<std::vector<SqlRow>> Database::query(std::string_view sql, const std::vector<SqlValue>& params) {
    auto stmt = prepared(sql);
    if (!stmt)
        return stmt.error();
    sqlite3_stmt* raw = *stmt;
    // Reset on every way out, so the statement never holds a read lock.
    std::unique_ptr<sqlite3_stmt, decltype(&sqlite3_reset)> reset(raw, &sqlite3_reset);
    sqlite3_clear_bindings(raw);
    for (size_t i = 0; i < params.size(); i++) {
        int index = static_cast<int>(i + 1);
        const SqlValue& p = params[i];
        if (std::holds_alternative<int64_t>(p))
            sqlite3_bind_int64(raw, index, std::get<int64_t>(p));
        else if (std::holds_alternative<double>(p))
            sqlite3_bind_double(raw, index, std::get<double>(p));
        else if (std::holds_alternative<std::string>(p))
            sqlite3_bind_text(raw, index, std::get<std::string>(p).data(),
                              static_cast<int>(std::get<std::string>(p).size()), SQLITE_TRANSIENT);
        else
            sqlite3_bind_null(raw, index);
    }
    std::vector<SqlRow> rows;
    for (;;) {
        int rc = sqlite3_step(raw);
        if (rc == SQLITE_DONE)
            return rows;
        if (rc != SQLITE_ROW)
            return error("step");
        SqlRow row;
        for (int c = 0; c < sqlite3_column_count(raw); c++) {
            switch (sqlite3_column_type(raw, c)) {
                case SQLITE_INTEGER:
                    row.emplace_back(static_cast<int64_t>(sqlite3_column_int64(raw, c)));
                    break;
                case SQLITE_FLOAT:
                    row.emplace_back(sqlite3_column_double(raw, c));
                    break;
                case SQLITE_NULL:
                    row.emplace_back(nullptr);
                    break;
                default:
                    // With its length: output may hold NUL bytes.
                    row.emplace_back(std::string(reinterpret_cast<const char*>(sqlite3_column_text(raw, c)),
                                                 static_cast<size_t>(sqlite3_column_bytes(raw, c))));
            }
        }
        rows.push_back(std::move(row));
    }
}

Result<StoreConnections> open_store(const std::string& path, std::string_view own_table, std::string_view schema,
                                    std::string_view what, std::string_view version) {
    auto writer = Database::open(path, own_table);
    if (!writer)
        return writer.error();
    if (auto r = writer->exec("PRAGMA synchronous=FULL;"); !r)
        return r.error();
    if (auto r = writer->exec(schema); !r)
        return r.error();
    auto found = writer->query("SELECT value FROM meta WHERE key = 'schema_version'");
    if (!found)
        return found.error();
    std::string have = found->empty() ? "?" : sql_text((*found)[0][0]);
    if (have != version)
        return make_error(EINVAL, fmt::format("{}: {} schema version {} (this broker reads version {})", writer->path(),
                                              what, have, version));
    auto reader = Database::open(path, own_table);
    if (!reader)
        return reader.error();
    return StoreConnections{std::move(*writer), std::move(*reader)};
}

}  // namespace banyan
