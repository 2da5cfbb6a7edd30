#include "broker/accounting/accounting_service.hpp"

#include <set>

#include <fmt/format.h>

#include "core/json_field.hpp"

namespace banyan {

namespace {

constexpr uint64_t kMaxHistory = 100000;

}  // namespace

Result<std::unique_ptr<AccountingService>> AccountingService::start(Broker& broker) {
    std::unique_ptr<AccountingService> svc(new AccountingService(broker));
    if (broker.bootstrap().rank != 0)
        return svc;
    auto db = AccountingDb::open(broker.reactor(), broker.bootstrap().statedir);
    if (!db)
        return db.error();
    svc->db_ = std::move(*db);
    AccountingService* p = svc.get();
    broker.register_method("accounting.record", true, [p](const Message& req) { p->on_record(req); });
    broker.register_method("accounting.history", false, [p](const Message& req) { p->on_history(req); });
    return svc;
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
        auto r = UsageRecord::from_json(j);
        if (!r)
            return broker_.respond_error(req, EPROTO, r.error().message);  // nothing stored
        records.push_back(std::move(*r));
    }
    Message request = req;
    request.payload.reset();  // enough to answer it
    db_->add(std::move(records), [this, request = std::move(request)] {
        broker_.respond(Message::response_to(request, nlohmann::json::object()));
    });
}

// accounting.history {userid?, all?, since?, until?, results?, name?, count?}
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
    auto count = json_field<uint64_t>(*body, "count", 1000, "");
    if (auto e = first_error(userid, all, since, until, results, name, count))
        return broker_.respond_error(req, EINVAL, e->message);
    bool owner = req.rolemask & role::owner;
    if ((*all || *userid != req.userid) && !owner)
        return broker_.respond_error(req, EPERM,
                                     "accounting.history: only the instance owner may read other users' records");
    if (*count < 1 || *count > kMaxHistory)
        return broker_.respond_error(req, EINVAL, fmt::format("count: expected 1 to {}", kMaxHistory));
    HistoryFilter filter{.since = *since, .until = *until, .name = *name, .count = *count};
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

}  // namespace banyan
