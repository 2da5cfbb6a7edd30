// SqlStore: what Banyan's stores ask of a SQL database, whichever it is
// (sqlite, core/sqlite.hpp; PostgreSQL for a shared accounting store,
// broker/accounting/postgres_store.hpp). Statements use `?` for their
// positional parameters and the SQL both understand.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/result.hpp"

namespace banyan {

using SqlValue = std::variant<std::nullptr_t, int64_t, double, std::string>;
using SqlRow = std::vector<SqlValue>;

// A column's value as the type a reader expects; another type (NULL among
// them) reads as 0 or "".
inline int64_t sql_int(const SqlValue& v) {
    return std::holds_alternative<int64_t>(v) ? std::get<int64_t>(v) : 0;
}
inline double sql_real(const SqlValue& v) {
    return std::holds_alternative<double>(v) ? std::get<double>(v) : static_cast<double>(sql_int(v));
}
inline std::string sql_text(const SqlValue& v) {
    return std::holds_alternative<std::string>(v) ? std::get<std::string>(v) : "";
}

class SqlStore {
  public:
    virtual ~SqlStore() = default;
    // Runs SQL with no parameters and no result rows (schema, BEGIN).
    virtual Result<void> exec(std::string_view sql) = 0;
    // Runs one statement with positional parameters; returns its rows.
    virtual Result<std::vector<SqlRow>> query(std::string_view sql, const std::vector<SqlValue>& params = {}) = 0;
    // What errors name it by: a file, or a database.
    virtual const std::string& path() const = 0;
};

// Runs `statements` — each (SQL, parameters) — as one transaction: all of
// them or, on the first error (returned), none.
inline Result<void> run_all_or_none(SqlStore& db,
                                    const std::vector<std::pair<std::string_view, std::vector<SqlValue>>>& statements) {
    if (auto r = db.exec("BEGIN"); !r)
        return r;
    for (const auto& [sql, params] : statements)
        if (auto done = db.query(sql, params); !done) {
            (void)db.exec("ROLLBACK");
            return done.error();
        }
    if (auto r = db.exec("COMMIT"); !r) {
        (void)db.exec("ROLLBACK");
        return r;
    }
    return {};
}

}  // namespace banyan
