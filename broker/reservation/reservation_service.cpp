#include "broker/reservation/reservation_service.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <climits>

#include <fmt/format.h>

#include "core/duration.hpp"
#include "core/json_field.hpp"
#include "core/log.hpp"
#include "core/sqlite.hpp"

namespace banyan {

namespace {

constexpr size_t kMaxName = 64;
constexpr int64_t kNever = INT64_MAX;
// Far enough for any plan, near enough that times stay well inside the
// planners' and timers' ranges.
constexpr int64_t kMaxAhead = int64_t{10} * 366 * 86400;
// The longest the timer sleeps at once (it wakes, finds nothing due, and
// sleeps again): a clock set forward is noticed within it.
constexpr int64_t kMaxSleep = 3600;
// A start this far in the past is taken as now (the clock of the client
// that wrote "now"); further back it is refused.
constexpr int64_t kStartSlack = 60;

bool good_name(const std::string& name) {
    if (name.empty() || name.size() > kMaxName || !std::isalnum(static_cast<unsigned char>(name[0])))
        return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    });
}

std::string maintenance_reason(const std::string& name) {
    return "maintenance reservation " + name;
}

}  // namespace

nlohmann::json Reservation::to_json() const {
    return {{"name", name},   {"start", start},         {"end", end},     {"ranks", ranks.format()},
            {"hosts", hosts}, {"users", users},         {"banks", banks}, {"maintenance", maintenance},
            {"userid", userid}, {"t_create", t_create}};
}

Result<Reservation> Reservation::from_json(const nlohmann::json& j) {
    Reservation r;
    auto name = json_field<std::string>(j, "name", "", "reservation");
    auto start = json_field<int64_t>(j, "start", 0, "reservation");
    auto end = json_field<int64_t>(j, "end", 0, "reservation");
    auto ranks = json_field<std::string>(j, "ranks", "", "reservation");
    auto hosts = json_field<std::string>(j, "hosts", "", "reservation");
    auto users = json_field<nlohmann::json>(j, "users", nlohmann::json::array(), "reservation");
    auto banks = json_field<nlohmann::json>(j, "banks", nlohmann::json::array(), "reservation");
    auto maintenance = json_field<bool>(j, "maintenance", false, "reservation");
    auto userid = json_field<uint32_t>(j, "userid", 0, "reservation");
    auto t_create = json_field<double>(j, "t_create", 0, "reservation");
    if (auto e = first_error(name, start, end, ranks, hosts, users, banks, maintenance, userid, t_create))
        return *e;
    auto idset = IdSet::parse(*ranks);
    if (!idset)
        return make_error(EPROTO, "reservation.ranks: " + idset.error().message);
    for (const auto& u : *users) {
        auto uid = json_as<uint32_t>(u, "reservation.users[]");
        if (!uid)
            return uid.error();
        r.users.push_back(*uid);
    }
    for (const auto& b : *banks) {
        auto bank = json_as<std::string>(b, "reservation.banks[]");
        if (!bank)
            return bank.error();
        r.banks.push_back(*bank);
    }
    r.name = *name;
    r.start = *start;
    r.end = *end;
    r.ranks = *idset;
    r.hosts = *hosts;
    r.maintenance = *maintenance;
    r.userid = *userid;
    r.t_create = *t_create;
    return r;
}

Result<std::unique_ptr<ReservationService>> ReservationService::start(Broker& broker) {
    std::unique_ptr<ReservationService> svc(new ReservationService(broker));
    if (broker.bootstrap().rank != 0)
        return svc;
    if (auto r = svc->open_database(); !r)
        return r.error();
    svc->register_methods();
    // The scheduler plans them again on the same nodes before the job
    // manager, started after this, sends anything (requests are handled in
    // order). Those that ended while rank 0 was down end at the first tick.
    int64_t now = static_cast<int64_t>(wall_now());
    for (const auto& [name, r] : svc->reservations_) {
        if (r.end <= now)
            continue;
        nlohmann::json body = {{"name", name}, {"start", r.start}, {"end", r.end}, {"ranks", r.ranks.format()}};
        broker.rpc(Message::request("sched.reserve", std::move(body), 0), [p = svc.get(), name](const Message& resp) {
            if (!resp.errnum)
                return;
            log::error("reservation", "{}: the scheduler refused it after the restart: {}", name, resp.error_text());
            // Its nodes are gone from the graph: it cannot be kept as it
            // was, and none is kept half. (Another refusal is a fault of
            // ours, not of the reservation: it is kept, and logged.)
            if (resp.errnum == ENOENT)
                p->finish(name, "could not be restored", [](const Result<void>&) {});
        });
    }
    broker.when_running([p = svc.get()] { p->tick(); });
    return svc;
}

Result<void> ReservationService::open_database() {
    std::string path = broker_.bootstrap().statedir + "/reservations.db";
    // O_CLOEXEC: sqlite's unix VFS opens the file, -wal and -shm with it,
    // and Database::open marks each FD_CLOEXEC too (mark_close_on_exec_of).
    auto db = Database::open(path, "reservation");  // close-on-exec (O_CLOEXEC), as above
    if (!db)
        return db.error();
    if (auto r = db->exec("CREATE TABLE IF NOT EXISTS reservation (name TEXT PRIMARY KEY, body TEXT NOT NULL)"); !r)
        return make_error(r.error().code, fmt::format("{}: {}", path, r.error().message));
    // Read once at start, before the loop runs.
    auto rows = db->query("SELECT name, body FROM reservation");
    if (!rows)
        return make_error(rows.error().code, fmt::format("{}: {}", path, rows.error().message));
    for (const auto& row : *rows) {
        std::string name = sql_text(row[0]);
        auto body = nlohmann::json::parse(sql_text(row[1]), nullptr, false);
        auto r = body.is_discarded() ? Result<Reservation>(make_error(EPROTO, "not JSON")) : Reservation::from_json(body);
        if (!r || r->name != name) {
            log::error("reservation", "{}: reservation {} cannot be read back ({}): left out", path, name,
                       r ? "its name differs" : r.error().message);
            continue;
        }
        reservations_.emplace(name, std::move(*r));
    }
    if (!reservations_.empty())
        log::info("reservation", "{} reservation{} from {}", reservations_.size(),
                  reservations_.size() == 1 ? "" : "s", path);
    db_ = std::make_unique<DbWorker>(broker_.reactor(), std::move(*db));
    return {};
}

void ReservationService::register_methods() {
    broker_.register_method("reservation.create", true, broker_.at_rank0([this](const Message& r) { on_create(r); }));
    broker_.register_method("reservation.delete", true, broker_.at_rank0([this](const Message& r) { on_delete(r); }));
    broker_.register_method("reservation.check", true, broker_.at_rank0([this](const Message& r) { on_check(r); }));
    broker_.register_method("reservation.list", false, broker_.at_rank0([this](const Message& r) { on_list(r); }));
}

void ReservationService::on_create(const Message& req) {
    auto body = req.json();
    if (!body)
        return broker_.respond_error(req, EPROTO, body.error().message);
    const nlohmann::json& p = *body;
    auto name = json_field<std::string>(p, "name", "", req.topic);
    auto start = json_field<int64_t>(p, "start", 0, req.topic);
    auto end = json_field<int64_t>(p, "end", 0, req.topic);
    auto count = json_field<int64_t>(p, "nodes", 0, req.topic);
    auto hostlist = json_field<std::string>(p, "hostlist", "", req.topic);
    auto constraint = json_field<nlohmann::json>(p, "constraint", nlohmann::json(), req.topic);
    auto maintenance = json_field<bool>(p, "maintenance", false, req.topic);
    // The user and bank lists are read whole, as the stored form is.
    auto users = json_field<nlohmann::json>(p, "users", nlohmann::json::array(), req.topic);
    auto banks = json_field<nlohmann::json>(p, "banks", nlohmann::json::array(), req.topic);
    if (auto e = first_error(name, start, end, count, hostlist, constraint, maintenance, users, banks))
        return broker_.respond_error(req, EPROTO, e->message);
    auto lists = Reservation::from_json({{"users", *users}, {"banks", *banks}});
    if (!lists)
        return broker_.respond_error(req, EPROTO, lists.error().message);
    if (!good_name(*name))
        return broker_.respond_error(
            req, EINVAL,
            fmt::format("reservation name '{}': expected 1 to {} of A-Z a-z 0-9 . _ -, starting with a letter or digit",
                        *name, kMaxName));
    int64_t now = static_cast<int64_t>(wall_now());
    if (*end <= *start)
        return broker_.respond_error(req, EINVAL, "a reservation must end after it starts");
    if (*end <= now)
        return broker_.respond_error(req, EINVAL,
                                     fmt::format("reservation {} would end in the past ({})", *name,
                                                 format_moment(static_cast<double>(*end))));
    if (*end > now + kMaxAhead)
        return broker_.respond_error(req, EINVAL,
                                     fmt::format("reservation {} would end more than 10 years from now", *name));
    if (*start < now - kStartSlack)
        return broker_.respond_error(req, EINVAL,
                                     fmt::format("reservation {} would start in the past ({}); to start it now, "
                                                 "give the start as now",
                                                 *name, format_moment(static_cast<double>(*start))));
    if (*count < 0)
        return broker_.respond_error(req, EINVAL, fmt::format("nodes {}: expected at least 1", *count));
    size_t selections = (*count > 0 || !constraint->is_null()) + !hostlist->empty();
    if (selections != 1)
        return broker_.respond_error(req, EINVAL,
                                     "give its nodes by count (--nodes, with --requires or not), by host list "
                                     "(--hostlist) or by constraint (--requires): one of them");
    if (reservations_.count(*name) || busy_.count(*name))
        return broker_.respond_error(req, EEXIST, fmt::format("a reservation named '{}' exists", *name));
    Reservation r = std::move(*lists);
    r.name = *name;
    r.start = std::max(*start, now);
    r.end = *end;
    r.maintenance = *maintenance;
    r.userid = req.userid;
    r.t_create = wall_now();
    nlohmann::json ask = {{"name", r.name}, {"start", r.start}, {"end", r.end}};
    if (*count > 0)
        ask["nodes"] = *count;
    if (!hostlist->empty())
        ask["hostlist"] = *hostlist;
    if (!constraint->is_null())
        ask["constraint"] = *constraint;
    busy_.insert(r.name);
    broker_.rpc(Message::request("sched.reserve", std::move(ask), 0),
                [this, req, r = std::move(r)](const Message& resp) mutable {
                    auto chosen = resp.errnum ? Result<nlohmann::json>(make_error(static_cast<int>(resp.errnum),
                                                                                  resp.error_text()))
                                              : resp.json();
                    auto ranks = chosen ? json_field<std::string>(*chosen, "ranks", "", resp.topic)
                                        : Result<std::string>(chosen.error());
                    auto hosts = chosen ? json_field<std::string>(*chosen, "hosts", "", resp.topic)
                                        : Result<std::string>(chosen.error());
                    auto idset = ranks ? IdSet::parse(*ranks) : Result<IdSet>(ranks.error());
                    if (auto e = first_error(idset, hosts)) {
                        busy_.erase(r.name);
                        return broker_.respond_error(req, e->code, fmt::format("reservation {}: {}", r.name,
                                                                               e->message));
                    }
                    r.ranks = *idset;
                    r.hosts = *hosts;
                    store(req, std::move(r));
                });
}

void ReservationService::store(const Message& req, Reservation r) {
    std::string name = r.name, body = r.to_json().dump();
    db_->run(
        [name, body](Database& db) -> Result<void> {
            auto done = db.query("INSERT INTO reservation (name, body) VALUES (?, ?)", {name, body});
            if (!done)
                return done.error();
            return {};
        },
        [this, req, r = std::move(r)](const Result<void>& stored) mutable {
            busy_.erase(r.name);
            if (!stored) {
                // Not kept: the scheduler forgets it too, and nothing is half made.
                broker_.rpc(Message::request("sched.unreserve", {{"name", r.name}, {"why", "was not stored"}}, 0),
                            [](const Message&) {});
                return broker_.respond_error(req, stored.error().code,
                                             fmt::format("reservation {} was not stored: {}", r.name,
                                                         stored.error().message));
            }
            log::info("reservation", "{} made by uid {}: {} ({}) from {} to {}{}", r.name, req.userid, r.hosts,
                      r.ranks.format(), format_moment(static_cast<double>(r.start)),
                      format_moment(static_cast<double>(r.end)), r.maintenance ? ", maintenance" : "");
            nlohmann::json answer = {{"reservation", r.to_json()}};
            reservations_.emplace(r.name, std::move(r));
            broker_.respond(Message::response_to(req, std::move(answer)));
            tick();
        });
}

void ReservationService::on_list(const Message& req) {
    std::vector<const Reservation*> all;
    for (const auto& [name, r] : reservations_)
        all.push_back(&r);
    std::stable_sort(all.begin(), all.end(), [](const Reservation* a, const Reservation* b) {
        return a->start < b->start;
    });
    nlohmann::json list = nlohmann::json::array();
    for (const Reservation* r : all)
        list.push_back(r->to_json());
    broker_.respond(Message::response_to(req, {{"reservations", std::move(list)}}));
}

void ReservationService::on_delete(const Message& req) {
    auto body = req.json();
    auto name = body ? json_field<std::string>(*body, "name", "", req.topic) : Result<std::string>(body.error());
    if (!name)
        return broker_.respond_error(req, EPROTO, name.error().message);
    if (!reservations_.count(*name))
        return broker_.respond_error(req, ENOENT, fmt::format("no reservation named '{}'", *name));
    if (busy_.count(*name))
        return broker_.respond_error(req, EBUSY, fmt::format("reservation {} is ending already", *name));
    finish(*name, "was deleted", [this, req](const Result<void>& done) {
        if (!done)
            return broker_.respond_error(req, done.error().code, done.error().message);
        broker_.respond(Message::response_to(req, nlohmann::json::object()));
    });
}

void ReservationService::on_check(const Message& req) {
    auto body = req.json();
    if (!body)
        return broker_.respond_error(req, EPROTO, body.error().message);
    auto name = json_field<std::string>(*body, "name", "", req.topic);
    auto userid = json_field<uint32_t>(*body, "userid", 0, req.topic);
    auto bank = json_field<std::string>(*body, "bank", "", req.topic);
    auto owner = json_field<bool>(*body, "owner", false, req.topic);
    if (auto e = first_error(name, userid, bank, owner))
        return broker_.respond_error(req, EPROTO, e->message);
    auto it = reservations_.find(*name);
    if (it == reservations_.end() || busy_.count(*name))
        return broker_.respond_error(req, ENOENT, fmt::format("no reservation named '{}'", *name));
    const Reservation& r = it->second;
    if (r.maintenance)
        return broker_.respond_error(req, EINVAL,
                                     fmt::format("reservation {} is for maintenance: no job runs in it", r.name));
    bool allowed = *owner || std::find(r.users.begin(), r.users.end(), *userid) != r.users.end() ||
                   (!bank->empty() && std::find(r.banks.begin(), r.banks.end(), *bank) != r.banks.end());
    if (!allowed)
        return broker_.respond_error(req, EPERM, fmt::format("reservation {}: uid {} may not use it", r.name, *userid));
    broker_.respond(Message::response_to(req, nlohmann::json::object()));
}

void ReservationService::finish(const std::string& name, const std::string& why,
                                std::function<void(const Result<void>&)> done) {
    busy_.insert(name);
    db_->run(
        [name](Database& db) -> Result<void> {
            auto gone = db.query("DELETE FROM reservation WHERE name = ?", {name});
            if (!gone)
                return gone.error();
            return {};
        },
        [this, name, why, done = std::move(done)](const Result<void>& stored) {
            busy_.erase(name);
            auto it = reservations_.find(name);
            if (it == reservations_.end())
                return;
            if (!stored) {
                // Kept as it was; an end is tried again at the next tick.
                log::error("reservation", "{}: cannot remove it from the database: {}", name, stored.error().message);
                done(make_error(EIO, fmt::format("reservation {}: cannot remove it from the database: {}", name,
                                                 stored.error().message)));
                timer_.start(std::chrono::seconds(1), [this] { tick(); });
                return;
            }
            Reservation r = std::move(it->second);
            reservations_.erase(it);
            broker_.rpc(Message::request("sched.unreserve", {{"name", name}, {"why", why}}, 0),
                        [name](const Message& resp) {
                            if (resp.errnum && resp.errnum != ENOENT)
                                log::error("reservation", "{}: sched.unreserve: {}", name, resp.error_text());
                        });
            if (r.maintenance) {
                drained_.erase(name);
                nlohmann::json undrain = {{"targets", r.ranks.format()}, {"reason", maintenance_reason(name)}};
                broker_.rpc(Message::request("resource.undrain", std::move(undrain), 0), [name](const Message& resp) {
                    if (resp.errnum)
                        log::error("reservation", "{}: cannot undrain its nodes: {}", name, resp.error_text());
                });
            }
            log::info("reservation", "{} {}", name, why);
            done({});
            tick();
        });
}

void ReservationService::tick() {
    int64_t now = static_cast<int64_t>(wall_now());
    int64_t next = kNever;
    std::vector<std::string> ended;
    for (const auto& [name, r] : reservations_) {
        if (busy_.count(name))
            continue;
        if (r.end <= now) {
            ended.push_back(name);
            continue;
        }
        if (r.maintenance && !drained_.count(name)) {
            if (r.start <= now) {
                drained_.insert(name);
                nlohmann::json drain = {{"targets", r.ranks.format()}, {"reason", maintenance_reason(name)}};
                broker_.rpc(Message::request("resource.drain", std::move(drain), 0), [name](const Message& resp) {
                    if (resp.errnum)
                        log::error("reservation", "{}: cannot drain its nodes: {}", name, resp.error_text());
                });
            } else {
                next = std::min(next, r.start);
            }
        }
        next = std::min(next, r.end);
    }
    for (const std::string& name : ended)
        finish(name, "ended", [](const Result<void>&) {});
    if (next != kNever)
        timer_.start(std::chrono::seconds(std::clamp<int64_t>(next - now, 0, kMaxSleep)) + std::chrono::milliseconds(10),
                     [this] { tick(); });
    else
        timer_.cancel();
}

}  // namespace banyan
