// Sqlite: the one way Banyan talks to sqlite3 — a database handle and
// prepared statements, both RAII. Opened in WAL mode.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "core/result.hpp"
#include "core/sql_store.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace banyan {

class Database final : public SqlStore {
  public:
    // Opens (creating) the file in WAL mode. A database that has tables
    // but not `own_table` is another program's: refused before anything is
    // written to it. Error names the file. Every descriptor sqlite opens
    // for it (the file, its -wal and -shm, journals) is close-on-exec: its
    // unix VFS opens them all with O_CLOEXEC, and open() marks those open
    // once it returns (mark_close_on_exec_of; test_accounting checks it).
    static Result<Database> open(const std::string& path, std::string_view own_table);
    Database(Database&&) noexcept;
    Database& operator=(Database&&) noexcept;
    ~Database() override;

    // Runs SQL with no parameters and no result rows (schema, pragmas).
    Result<void> exec(std::string_view sql) override;
    // Runs one statement with positional parameters; returns its rows. The
    // statement is prepared once per distinct SQL text and kept.
    Result<std::vector<SqlRow>> query(std::string_view sql, const std::vector<SqlValue>& params = {}) override;
    const std::string& path() const override { return path_; }

  private:
    struct StatementDeleter {
        void operator()(sqlite3_stmt* s) const;
    };
    using Statement = std::unique_ptr<sqlite3_stmt, StatementDeleter>;

    Database() = default;
    Error error(std::string_view what) const;
    Result<sqlite3_stmt*> prepared(std::string_view sql);

    sqlite3* db_ = nullptr;
    std::string path_;
    std::unordered_map<std::string, Statement> statements_;
};

// One of rank 0's stores (the job database, the accounting store): a
// connection for the writer, whose commits survive the machine crashing
// (synchronous=FULL), with `schema` run and the schema_version of its meta
// table checked to be `version`; and a second connection for reads (in WAL
// mode it reads the last commit while the next is written). Error names
// the file, or the version found, calling the store `what`.
struct StoreConnections {
    Database writer;
    Database reader;
};
Result<StoreConnections> open_store(const std::string& path, std::string_view own_table, std::string_view schema,
                                    std::string_view what, std::string_view version = "1");

}  // namespace banyan
