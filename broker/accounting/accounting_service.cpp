#include "broker/accounting/accounting_service.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "core/duration.hpp"
#include "core/json_field.hpp"
#include "core/log.hpp"

namespace banyan {

namespace {

constexpr uint64_t kMaxHistory = 100000;

}  // namespace

Result<std::unique_ptr<AccountingService>> AccountingService::start(Broker& broker) {
    if (broker.bootstrap().rank != 0)
        return std::unique_ptr<AccountingService>(new AccountingService(broker, {}));
    auto settings = PrioritySettings::read(broker.bootstrap().config);
    if (!settings)
        return settings.error();
    const Config& config = broker.bootstrap().config;
    auto database = config.get_string("accounting.database", "");
    auto cluster = config.get_string("accounting.cluster", "");
    if (auto e = first_error(database, cluster))
        return *e;
    if (!database->empty() && !database->starts_with("postgresql://") && !database->starts_with("postgres://"))
        return make_error(EINVAL, fmt::format("{}: accounting.database: expected postgresql://... (or nothing: "
                                              "STATEDIR/accounting.db)",
                                              config.source()));
    if (!database->empty() && cluster->empty())
        return make_error(EINVAL, fmt::format("{}: accounting.cluster: required with a PostgreSQL store (it names "
                                              "this cluster's records among the others')",
                                              config.source()));
    std::unique_ptr<AccountingService> svc(new AccountingService(broker, *settings));
    auto db = AccountingDb::open(broker.reactor(), broker.bootstrap().statedir, {*database, *cluster});
    if (!db)
        return db.error();
    svc->db_ = std::move(*db);
    if (auto r = svc->load(); !r)
        return r.error();
    AccountingService* p = svc.get();
    auto method = [&](const char* topic, bool owner_only, void (AccountingService::*fn)(const Message&)) {
        broker.register_method(topic, owner_only, [p, fn](const Message& r) { (p->*fn)(r); });
    };
    method("accounting.record", true, &AccountingService::on_record);
    method("accounting.history", false, &AccountingService::on_history);
    method("accounting.banks", false, &AccountingService::on_banks);
    method("accounting.usage", false, &AccountingService::on_usage);
    method("accounting.stats", true, &AccountingService::on_stats);
    // The owner's changes of the bank tables (accounting_bank_changes.cpp):
    // each gets the request's body, refused before it while the tables are
    // not known (a shared store that has not answered yet).
    auto change = [&](const char* topic, void (AccountingService::*fn)(const Message&, const nlohmann::json&)) {
        broker.register_method(topic, true, [p, fn](const Message& r) {
            if (!p->loaded_)
                return p->broker_.respond_error(
                    r, EAGAIN, "the accounting store cannot be reached: banks cannot be changed now");
            auto body = r.json();
            if (!body)
                return p->broker_.respond_error(r, EPROTO, body.error().message);
            (p->*fn)(r, *body);
        });
    };
    change("accounting.bank-add", &AccountingService::on_bank_add);
    change("accounting.bank-set", &AccountingService::on_bank_set);
    change("accounting.bank-remove", &AccountingService::on_bank_remove);
    change("accounting.user-add", &AccountingService::on_user_add);
    change("accounting.user-set", &AccountingService::on_user_set);
    change("accounting.user-remove", &AccountingService::on_user_remove);
    auto every = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(settings->recalc_interval));
    svc->recalc_.start_repeating(every, [p] { p->publish(nullptr); });
    return svc;
}

AccountingService::AccountingService(Broker& broker, PrioritySettings settings)
    : broker_(broker), settings_(settings), recalc_(broker.reactor()) {}

// At start (before the loop serves anyone): the tables, the usage of the
// last 64 half-lives (what is older counts under 2^-64 of itself), and
// the first factors, computed here so the job manager starts with them.
//
// A shared store that cannot be reached leaves the tables empty until it
// can (read again at each computation): rank 0 runs on, and no bank can
// be changed meanwhile.
Result<void> AccountingService::load() {
    auto banks = db_->load_banks();
    double now = wall_now(), h = settings_.decay_half_life;
    auto sums = banks ? db_->load_usage(now - 64 * h, std::max(1.0, h / 64)) : Result<std::vector<UsageSum>>(banks.error());
    if (!sums) {
        if (!db_->shared())
            return sums.error();
        log::error("accounting", "banks not read (they are once the store answers): {}", sums.error().message);
    } else {
        banks_ = std::move(*banks);
        loaded_ = true;
        for (const auto& u : *sums)
            add_usage(u.userid, u.bank, u.t_end, u.core_seconds);
    }
    published_ = banks_;
    for (auto& a : published_.users)
        a.usage = usage_of(a.userid, a.bank, now);
    fair_tree(published_);
    return {};
}

double AccountingService::usage_of(uint32_t userid, const std::string& bank, double now) const {
    auto it = usage_.find({userid, bank});
    if (it == usage_.end())
        return 0;
    return it->second.value * std::exp2(-std::max(0.0, now - it->second.at) / settings_.decay_half_life);
}

void AccountingService::add_usage(uint32_t userid, const std::string& bank, double t_end, double core_seconds) {
    if (bank.empty() || !(core_seconds > 0) || !std::isfinite(core_seconds))
        return;
    double now = wall_now();
    double added = core_seconds * std::exp2(-std::max(0.0, now - t_end) / settings_.decay_half_life);
    usage_[{userid, bank}] = {usage_of(userid, bank, now) + added, now};
}

void AccountingService::publish(std::function<void()> then) {
    if (db_->shared()) {
        // Other clusters change the tables and add usage: read again
        // first (a store that does not answer leaves what is known).
        double now = wall_now(), h = settings_.decay_half_life;
        return db_->refresh(now - 64 * h, std::max(1.0, h / 64),
                            [this, then = std::move(then)](Result<AccountingDb::Refreshed> fresh) mutable {
                                if (fresh) {
                                    banks_ = std::move(fresh->banks);
                                    loaded_ = true;
                                    usage_.clear();
                                    for (const auto& u : fresh->usage)
                                        add_usage(u.userid, u.bank, u.t_end, u.core_seconds);
                                }
                                compute_and_send(std::move(then));
                            });
    }
    compute_and_send(std::move(then));
}

void AccountingService::compute_and_send(std::function<void()> then) {
    BankTable snapshot = banks_;
    double now = wall_now();
    for (auto& a : snapshot.users)
        a.usage = usage_of(a.userid, a.bank, now);
    db_->compute(
        [snapshot = std::move(snapshot)]() mutable -> Result<BankTable> {
            fair_tree(snapshot);
            return snapshot;
        },
        [this, then = std::move(then)](Result<BankTable> table) {
            if (!table) {  // (only an exception: bad_alloc)
                log::error("accounting", "fair-share not computed: {}", table.error().message);
                if (then)
                    then();
                return;
            }
            published_ = std::move(*table);
            broker_.rpc(Message::request("job-manager.banks", published_.to_json(), 0), [then](const Message& resp) {
                if (resp.errnum)
                    log::error("accounting", "job-manager.banks: {}", resp.error_text());
                if (then)
                    then();
            });
        });
}

// accounting.record {records}: answered once all are committed.
void AccountingService::on_record(const Message& req) {
    auto body = req.json();
    if (!body)
        return broker_.respond_error(req, EPROTO, body.error().message);
    auto list = json_field<nlohmann::json>(*body, "records", nlohmann::json::array(), "");
    if (!list)
        return broker_.respond_error(req, EPROTO, list.error().message);
    std::vector<UsageRecord> records;
    records.reserve(list->size());
    for (const auto& j : *list) {
        auto r = UsageRecord::from_row(j);
        if (!r)
            return broker_.respond_error(req, EPROTO, r.error().message);  // nothing stored
        records.push_back(std::move(*r));
    }
    // What each used, charged to its bank once stored, and only if it was
    // not stored before (after a restart the job manager sends the
    // records of the jobs it still keeps again: counted once).
    std::vector<std::pair<uint64_t, UsageSum>> used;
    used.reserve(records.size());
    for (const auto& r : records)
        used.push_back({r.id, {r.userid, r.bank, r.t_end, r.ncores * r.elapsed()}});
    std::vector<double> gpu_seconds;
    for (const auto& r : records)
        gpu_seconds.push_back(r.gpu_seconds());
    Message request = req;
    request.payload.reset();  // enough to answer it
    db_->add(std::move(records), [this, request = std::move(request), used = std::move(used),
                                  gpu_seconds = std::move(gpu_seconds)](const std::unordered_set<uint64_t>& stored) {
        for (size_t i = 0; i < used.size(); i++) {
            const auto& [id, u] = used[i];
            if (!stored.count(id))
                continue;
            add_usage(u.userid, u.bank, u.t_end, u.core_seconds);
            Used& total = used_[u.bank];
            total.jobs++;
            total.core_seconds += u.core_seconds;
            total.gpu_seconds += gpu_seconds[i];
        }
        broker_.respond(Message::response_to(request, nlohmann::json::object()));
    });
}

// accounting.history {userid?, all?, since?, until?, results?, name?, bank?, node?, id?, count?}
void AccountingService::on_history(const Message& req) {
    auto body = req.json();
    if (!body)
        return broker_.respond_error(req, EPROTO, body.error().message);
    auto userid = json_field<uint32_t>(*body, "userid", req.userid, "");
    auto all = json_field<bool>(*body, "all", false, "");
    auto since = json_field<double>(*body, "since", 0, "");
    auto until = json_field<double>(*body, "until", 0, "");
    auto results = json_field<nlohmann::json>(*body, "results", nlohmann::json::array(), "");
    auto name = json_field<std::string>(*body, "name", "", "");
    auto bank = json_field<std::string>(*body, "bank", "", "");
    auto node = json_field<std::string>(*body, "node", "", "");
    auto count = json_field<uint64_t>(*body, "count", 1000, "");
    auto id = json_field<uint64_t>(*body, "id", 0, "");
    if (auto e = first_error(userid, all, since, until, results, name, bank, node, count, id))
        return broker_.respond_error(req, EINVAL, e->message);
    bool owner = req.rolemask & role::owner;
    if ((*all || *userid != req.userid) && !owner)
        return broker_.respond_error(req, EPERM,
                                     "accounting.history: only the instance owner may read other users' records");
    if (*count < 1 || *count > kMaxHistory)
        return broker_.respond_error(req, EINVAL, fmt::format("count: expected 1 to {}", kMaxHistory));
    HistoryFilter filter{
        .since = *since, .until = *until, .name = *name, .bank = *bank, .node = *node, .id = *id, .count = *count};
    if (!*all)
        filter.userid = *userid;
    // A set of the four known names: at most 15 shapes of query, whatever
    // the request repeats (the reader keeps each shape prepared).
    std::set<std::string> asked;
    for (const auto& r : *results) {
        if (!r.is_string() || !UsageRecord::known_result(r.get_ref<const std::string&>()))
            return broker_.respond_error(req, EINVAL,
                                         fmt::format("results: '{}' is not one of completed, failed, canceled, timeout",
                                                     one_line(r.is_string() ? r.get<std::string>() : r.dump())));
        asked.insert(r.get<std::string>());
    }
    filter.results.assign(asked.begin(), asked.end());
    Message request = req;
    request.payload.reset();
    db_->history(std::move(filter), [this, request = std::move(request)](Result<std::vector<UsageRecord>> found) {
        if (!found)
            return broker_.respond_error(request, EIO, found.error().message);
        nlohmann::json records = nlohmann::json::array();
        for (const auto& r : *found)
            records.push_back(r.to_json());
        broker_.respond(Message::response_to(request, {{"records", std::move(records)}}));
    });
}

// accounting.banks: the tables with usage and factors, as last computed.
void AccountingService::on_banks(const Message& req) {
    broker_.respond(Message::response_to(req, published_.to_json()));
}

// accounting.usage {since?, until?, by?, userid?, all?}: core-, GPU- and
// CPU-seconds per user and bank (by "user"), or per bank with its
// subtree's (by "bank"). A user sees their own rows and the totals of
// their banks; the owner, anyone's.
void AccountingService::on_usage(const Message& req) {
    auto body = req.json();
    if (!body)
        return broker_.respond_error(req, EPROTO, body.error().message);
    auto since = json_field<double>(*body, "since", 0, "");
    auto until = json_field<double>(*body, "until", 0, "");
    auto by = json_field<std::string>(*body, "by", "user", "");
    auto userid = json_field<uint32_t>(*body, "userid", req.userid, "");
    auto all = json_field<bool>(*body, "all", false, "");
    if (auto e = first_error(since, until, by, userid, all))
        return broker_.respond_error(req, EINVAL, e->message);
    if (*by != "user" && *by != "bank")
        return broker_.respond_error(req, EINVAL, fmt::format("by: '{}' is not user or bank", one_line(*by)));
    bool owner = req.rolemask & role::owner;
    bool by_bank = *by == "bank";
    if (!by_bank && (*all || *userid != req.userid) && !owner)
        return broker_.respond_error(req, EPERM, "accounting.usage: only the instance owner may see other users' usage");
    std::optional<uint32_t> one;
    if (!by_bank && !*all)
        one = *userid;
    // The banks a user may see the totals of: theirs, as they are now.
    std::set<std::string> visible;
    for (const auto& a : banks_.users)
        if (a.userid == req.userid)
            visible.insert(a.bank);
    Message request = req;
    request.payload.reset();
    db_->usage(*since, *until, one,
               [this, request = std::move(request), by_bank, owner, visible = std::move(visible)](
                   Result<std::vector<UsageRow>> rows) {
                   if (!rows)
                       return broker_.respond_error(request, EIO, rows.error().message);
                   nlohmann::json out = nlohmann::json::array();
                   auto row_json = [](const UsageRow& r) {
                       return nlohmann::json{{"bank", r.bank},          {"jobs", r.jobs}, {"core_seconds", r.core_seconds},
                                             {"gpu_seconds", r.gpu_seconds}, {"cpu", r.cpu}};
                   };
                   if (!by_bank) {
                       for (const auto& r : *rows) {
                           out.push_back(row_json(r));
                           out.back()["userid"] = r.userid;
                       }
                       return broker_.respond(Message::response_to(request, {{"rows", std::move(out)}}));
                   }
                   // Each bank's own and its subtree's: a row is added to
                   // its bank and every bank above it.
                   std::map<std::string, UsageRow> totals;
                   for (const auto& r : *rows) {
                       std::string at = r.bank;
                       for (size_t depth = 0; depth <= banks_.banks.size(); depth++) {
                           UsageRow& t = totals[at];
                           t.bank = at;
                           t.jobs += r.jobs;
                           t.core_seconds += r.core_seconds;
                           t.gpu_seconds += r.gpu_seconds;
                           t.cpu += r.cpu;
                           const Bank* b = at.empty() ? nullptr : banks_.find_bank(at);
                           if (!b || b->parent.empty())
                               break;
                           at = b->parent;
                       }
                   }
                   for (const auto& [name, t] : totals)
                       if (owner || visible.count(name))
                           out.push_back(row_json(t));
                   broker_.respond(Message::response_to(request, {{"rows", std::move(out)}}));
               });
}

// accounting.stats: what the jobs recorded since rank 0 started used, by
// bank (owner only; for /metrics).
void AccountingService::on_stats(const Message& req) {
    nlohmann::json banks = nlohmann::json::object();
    for (const auto& [bank, u] : used_)
        banks[bank] = {{"jobs", u.jobs}, {"core_seconds", u.core_seconds}, {"gpu_seconds", u.gpu_seconds}};
    broker_.respond(Message::response_to(req, {{"banks", std::move(banks)}}));
}

}  // namespace banyan
