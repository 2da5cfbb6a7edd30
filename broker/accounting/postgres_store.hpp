// PostgresStore: a SqlStore on a PostgreSQL server (libpq), for an
// accounting store that several clusters share (doc/spec/accounting.md
// §3). Statements are written with `?` placeholders, as for sqlite; they
// become $1, $2, ... here. A connection that broke is made again at the
// next statement, so a server that comes back is used again.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/sql_store.hpp"

struct pg_conn;

namespace banyan {

class PostgresStore final : public SqlStore {
  public:
    // Connects to `uri` (postgresql://...). Error: the server cannot be
    // reached or refuses; the message says why, with the password left out.
    // `setup` runs after every connection (the schema, its version
    // checked); its error is the connection's.
    using Setup = std::function<Result<void>(SqlStore&)>;
    static Result<std::unique_ptr<PostgresStore>> connect(const std::string& uri, Setup setup);
    // A store that connects at its first statement (the server may be
    // down at start: rank 0 runs on, its records wait).
    static std::unique_ptr<PostgresStore> later(const std::string& uri, Setup setup);
    ~PostgresStore() override;

    Result<void> exec(std::string_view sql) override;
    Result<std::vector<SqlRow>> query(std::string_view sql, const std::vector<SqlValue>& params = {}) override;
    const std::string& path() const override { return name_; }

  private:
    PostgresStore(std::string uri, Setup setup);
    Result<void> ensure_connected();

    std::string uri_;
    std::string name_;  // the URI without its password
    Setup setup_;
    pg_conn* conn_ = nullptr;
};

// The URI with any password replaced by "***" (for messages and logs).
std::string redact_uri(const std::string& uri);

}  // namespace banyan
