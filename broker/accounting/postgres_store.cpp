#include "broker/accounting/postgres_store.hpp"

#include <dlfcn.h>
#include <fcntl.h>

#include <cstdlib>
#include <type_traits>

#include <fmt/format.h>
#include <libpq-fe.h>

namespace banyan {
namespace {

// PostgreSQL's type oids for the columns read back (pg_type.h).
constexpr Oid kBool = 16, kInt8 = 20, kInt2 = 21, kInt4 = 23, kOid = 26, kFloat4 = 700, kFloat8 = 701,
              kNumeric = 1700;

// `?` to $1, $2, ... outside quoted text.
std::string numbered(std::string_view sql) {
    std::string out;
    out.reserve(sql.size() + 16);
    int n = 0;
    char quote = 0;
    for (char c : sql) {
        if (quote) {
            quote = c == quote ? 0 : quote;
        } else if (c == '\'' || c == '"') {
            quote = c;
        } else if (c == '?') {
            out += fmt::format("${}", ++n);
            continue;
        }
        out += c;
    }
    return out;
}

// A server that does not answer is given up on after 5 s unless the URI
// says otherwise (libpq's default is to wait as long as TCP does).
std::string with_timeout(std::string uri) {
    if (uri.find("connect_timeout=") == std::string::npos)
        uri += (uri.find('?') == std::string::npos ? "?" : "&") + std::string("connect_timeout=5");
    return uri;
}

// The libpq functions this store calls, found when the first PostgreSQL
// store connects: most brokers never use PostgreSQL, and linking libpq
// loaded some twenty more libraries (TLS, Kerberos, LDAP) into every
// broker at start-up (bench/RESULTS.md, issue 41).
struct Libpq {
    decltype(&::PQclear) PQclear;
    decltype(&::PQconnectdb) PQconnectdb;
    decltype(&::PQerrorMessage) PQerrorMessage;
    decltype(&::PQexec) PQexec;
    decltype(&::PQexecParams) PQexecParams;
    decltype(&::PQfinish) PQfinish;
    decltype(&::PQftype) PQftype;
    decltype(&::PQgetisnull) PQgetisnull;
    decltype(&::PQgetvalue) PQgetvalue;
    decltype(&::PQnfields) PQnfields;
    decltype(&::PQntuples) PQntuples;
    decltype(&::PQresultErrorMessage) PQresultErrorMessage;
    decltype(&::PQresultStatus) PQresultStatus;
    decltype(&::PQsetNoticeProcessor) PQsetNoticeProcessor;
    decltype(&::PQsocket) PQsocket;
    decltype(&::PQstatus) PQstatus;
};

struct LoadedLibpq {
    Libpq fns{};
    std::string error;  // empty once loaded
};

const LoadedLibpq& load_libpq() {
    static const LoadedLibpq loaded = [] {
        LoadedLibpq out;
        void* lib = dlopen("libpq.so.5", RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            out.error = fmt::format("PostgreSQL needs libpq.so.5 (Debian's libpq5): {}", dlerror());
            return out;
        }
        Libpq& fns = out.fns;
        auto find = [&](auto& fn, const char* name) {
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
            if (!fn && out.error.empty())
                out.error = fmt::format("libpq.so.5 has no {}", name);
        };
        find(fns.PQclear, "PQclear");
        find(fns.PQconnectdb, "PQconnectdb");
        find(fns.PQerrorMessage, "PQerrorMessage");
        find(fns.PQexec, "PQexec");
        find(fns.PQexecParams, "PQexecParams");
        find(fns.PQfinish, "PQfinish");
        find(fns.PQftype, "PQftype");
        find(fns.PQgetisnull, "PQgetisnull");
        find(fns.PQgetvalue, "PQgetvalue");
        find(fns.PQnfields, "PQnfields");
        find(fns.PQntuples, "PQntuples");
        find(fns.PQresultErrorMessage, "PQresultErrorMessage");
        find(fns.PQresultStatus, "PQresultStatus");
        find(fns.PQsetNoticeProcessor, "PQsetNoticeProcessor");
        find(fns.PQsocket, "PQsocket");
        find(fns.PQstatus, "PQstatus");
        return out;
    }();
    return loaded;
}

// Only once a store has connected (libpq is loaded then).
const Libpq& pq() {
    return load_libpq().fns;
}

std::string message_of(const pg_conn* conn) {
    return one_line(pq().PQerrorMessage(conn));
}

}  // namespace

std::string redact_uri(const std::string& uri) {
    // postgresql://user:password@host/...: the password goes.
    auto scheme = uri.find("://");
    auto at = uri.find('@', scheme == std::string::npos ? 0 : scheme);
    if (scheme == std::string::npos || at == std::string::npos)
        return uri;
    auto colon = uri.find(':', scheme + 3);
    if (colon == std::string::npos || colon > at)
        return uri;
    return uri.substr(0, colon + 1) + "***" + uri.substr(at);
}

PostgresStore::PostgresStore(std::string uri, Setup setup)
    : uri_(with_timeout(std::move(uri))), name_(redact_uri(uri_)), setup_(std::move(setup)) {}

PostgresStore::~PostgresStore() {
    if (conn_)
        pq().PQfinish(conn_);
}

std::unique_ptr<PostgresStore> PostgresStore::later(const std::string& uri, Setup setup) {
    return std::unique_ptr<PostgresStore>(new PostgresStore(uri, std::move(setup)));
}

Result<std::unique_ptr<PostgresStore>> PostgresStore::connect(const std::string& uri, Setup setup) {
    auto store = later(uri, std::move(setup));
    if (auto r = store->ensure_connected(); !r)
        return r.error();
    return store;
}

Result<void> PostgresStore::ensure_connected() {
    if (const std::string& missing = load_libpq().error; !missing.empty())
        return make_error(ENOENT, fmt::format("{}: {}", name_, missing));
    if (conn_ && pq().PQstatus(conn_) == CONNECTION_OK)
        return {};
    if (conn_)
        pq().PQfinish(conn_);
    conn_ = pq().PQconnectdb(uri_.c_str());
    if (!conn_ || pq().PQstatus(conn_) != CONNECTION_OK) {
        std::string why = conn_ ? message_of(conn_) : "out of memory";
        if (conn_)
            pq().PQfinish(conn_);
        conn_ = nullptr;
        return make_error(EIO, fmt::format("{}: {}", name_, why));
    }
    // libpq marks its socket close-on-exec; made sure of (a job inherits
    // nothing, whatever the library's version does).
    if (int fd = pq().PQsocket(conn_); fd >= 0)
        (void)fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC);
    // Warnings (a table that exists already) are not errors: kept quiet.
    pq().PQsetNoticeProcessor(
        conn_, [](void*, const char*) {}, nullptr);
    if (setup_)
        if (auto r = setup_(*this); !r) {
            pq().PQfinish(conn_);
            conn_ = nullptr;
            return r.error();
        }
    return {};
}

Result<void> PostgresStore::exec(std::string_view sql) {
    if (auto r = ensure_connected(); !r)
        return r.error();
    PGresult* res = pq().PQexec(conn_, std::string(sql).c_str());
    ExecStatusType status = pq().PQresultStatus(res);
    std::string why = one_line(pq().PQresultErrorMessage(res));
    pq().PQclear(res);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
        return make_error(EIO, fmt::format("{}: {}", name_, why.empty() ? message_of(conn_) : why));
    return {};
}

Result<std::vector<SqlRow>> PostgresStore::query(std::string_view sql, const std::vector<SqlValue>& params) {
    if (auto r = ensure_connected(); !r)
        return r.error();
    std::vector<std::string> text(params.size());
    std::vector<const char*> values(params.size());
    for (size_t i = 0; i < params.size(); i++) {
        const SqlValue& v = params[i];
        if (std::holds_alternative<std::nullptr_t>(v)) {
            values[i] = nullptr;
            continue;
        }
        if (const auto* n = std::get_if<int64_t>(&v))
            text[i] = std::to_string(*n);
        else if (const auto* d = std::get_if<double>(&v))
            text[i] = fmt::format("{}", *d);  // the shortest text that reads back as the same double
        else
            text[i] = std::get<std::string>(v);
        values[i] = text[i].c_str();
    }
    std::string statement = numbered(sql);
    PGresult* res = pq().PQexecParams(conn_, statement.c_str(), static_cast<int>(values.size()), nullptr, values.data(),
                                      nullptr, nullptr, 0);
    ExecStatusType status = pq().PQresultStatus(res);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
        std::string why = one_line(pq().PQresultErrorMessage(res));
        pq().PQclear(res);
        return make_error(EIO, fmt::format("{}: {}", name_, why.empty() ? message_of(conn_) : why));
    }
    std::vector<SqlRow> rows;
    int nrows = pq().PQntuples(res), ncols = pq().PQnfields(res);
    rows.reserve(static_cast<size_t>(nrows));
    for (int r = 0; r < nrows; r++) {
        SqlRow row;
        row.reserve(static_cast<size_t>(ncols));
        for (int c = 0; c < ncols; c++) {
            if (pq().PQgetisnull(res, r, c)) {
                row.emplace_back(nullptr);
                continue;
            }
            const char* v = pq().PQgetvalue(res, r, c);
            switch (pq().PQftype(res, c)) {
                case kInt8:
                case kInt4:
                case kInt2:
                case kOid:
                    row.emplace_back(static_cast<int64_t>(std::strtoll(v, nullptr, 10)));
                    break;
                case kBool:
                    row.emplace_back(static_cast<int64_t>(v[0] == 't'));
                    break;
                case kFloat4:
                case kFloat8:
                case kNumeric:
                    row.emplace_back(std::strtod(v, nullptr));
                    break;
                default:
                    row.emplace_back(std::string(v));
            }
        }
        rows.push_back(std::move(row));
    }
    pq().PQclear(res);
    return rows;
}

}  // namespace banyan
