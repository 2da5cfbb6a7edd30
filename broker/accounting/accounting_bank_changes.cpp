// The owner's changes of the bank tables (doc/spec/accounting.md §5, §9):
// checked against the tables in memory, made there, stored, and answered
// once stored and sent to the job manager (commit). Registered by
// AccountingService::start behind one check: the tables are known, and the
// body is JSON.
#include <algorithm>

#include <fmt/format.h>

#include "broker/accounting/accounting_service.hpp"
#include "core/json_field.hpp"
#include "core/log.hpp"

namespace banyan {

void AccountingService::commit(const Message& req, BankChange change) {
    Message request = req;
    request.payload.reset();
    db_->change_banks(std::move(change), [this, request = std::move(request)](const Result<void>& r) {
        if (r)
            return publish([this, request] { broker_.respond(Message::response_to(request, nlohmann::json::object())); });
        log::error("accounting", "a bank change was not stored: {}", r.error().message);
        // What memory says is no longer what is stored: read it back.
        db_->read_banks([this, request, error = r.error()](Result<BankTable> stored) {
            if (stored)
                banks_ = std::move(*stored);
            publish([this, request, error] {
                broker_.respond_error(request, EIO, "nothing was changed: " + error.message);
            });
        });
    });
}

BankChange AccountingService::user_change(uint32_t userid) const {
    BankChange change;
    change.userid = userid;
    for (const auto& a : banks_.users)
        if (a.userid == userid)
            change.rows.push_back(a);
    return change;
}

namespace {

// The fields a bank or user request may change; absent: unchanged.
struct Settings {
    std::optional<std::string> parent;
    std::optional<int64_t> shares;
    std::optional<BankLimits> limits;
    std::optional<bool> is_default;
};

Result<Settings> read_settings(const nlohmann::json& body, const BankLimits& limits_now, std::string_view topic) {
    Settings s;
    if (body.contains("parent")) {
        auto parent = json_field<std::string>(body, "parent", "", topic);
        if (!parent)
            return parent.error();
        s.parent = *parent;
    }
    if (body.contains("shares")) {
        auto shares = json_field<int64_t>(body, "shares", 1, topic);
        if (!shares)
            return shares.error();
        if (*shares < 0 || *shares > kMaxShares)
            return make_error(EINVAL, fmt::format("shares: {} is not 0 to {}", *shares, kMaxShares));
        s.shares = *shares;
    }
    if (body.contains("limits")) {
        BankLimits limits = limits_now;
        if (auto r = limits.update(body["limits"], "limits"); !r)
            return r.error();
        s.limits = limits;
    }
    if (body.contains("default")) {
        auto d = json_field<bool>(body, "default", false, topic);
        if (!d)
            return d.error();
        if (!*d)
            return make_error(EINVAL, "default: false: make another bank the default instead");
        s.is_default = true;
    }
    return s;
}

Result<std::string> read_bank_name(const nlohmann::json& body, std::string_view key, std::string_view topic) {
    if (!body.contains(key))
        return make_error(EINVAL, fmt::format("{}: {} is required", topic, key));
    auto name = json_field<std::string>(body, key, "", topic);
    if (!name)
        return name.error();
    if (auto r = check_bank_name(*name); !r)
        return r.error();
    return *name;
}

Result<uint32_t> read_userid(const nlohmann::json& body, std::string_view topic) {
    if (!body.contains("userid"))
        return make_error(EINVAL, fmt::format("{}: userid is required", topic));
    return json_field<uint32_t>(body, "userid", 0, topic);
}

}  // namespace

void AccountingService::on_bank_add(const Message& req, const nlohmann::json& body) {
    auto name = read_bank_name(body, "name", req.topic);
    auto settings = read_settings(body, {}, req.topic);
    if (auto e = first_error(name, settings))
        return broker_.respond_error(req, EINVAL, e->message);
    if (settings->is_default)
        return broker_.respond_error(req, EINVAL, "default: a bank has none (users have a default bank)");
    if (banks_.find_bank(*name))
        return broker_.respond_error(req, EEXIST, fmt::format("bank '{}' exists already", *name));
    Bank bank{*name, settings->parent.value_or(""), settings->shares.value_or(1), settings->limits.value_or(BankLimits{}),
              0};
    if (!bank.parent.empty() && !banks_.find_bank(bank.parent))
        return broker_.respond_error(req, ENOENT, fmt::format("parent: no bank '{}'", one_line(bank.parent)));
    banks_.banks.push_back(bank);
    commit(req, {.bank = bank.name, .row = bank, .userid = {}, .rows = {}});
}

void AccountingService::on_bank_set(const Message& req, const nlohmann::json& body) {
    auto name = read_bank_name(body, "name", req.topic);
    if (!name)
        return broker_.respond_error(req, EINVAL, name.error().message);
    Bank* bank = banks_.find_bank(*name);
    if (!bank)
        return broker_.respond_error(req, ENOENT, fmt::format("bank '{}': no such bank", *name));
    auto settings = read_settings(body, bank->limits, req.topic);
    if (!settings)
        return broker_.respond_error(req, EINVAL, settings.error().message);
    if (settings->is_default)
        return broker_.respond_error(req, EINVAL, "default: a bank has none (users have a default bank)");
    if (settings->parent && !settings->parent->empty()) {
        if (!banks_.find_bank(*settings->parent))
            return broker_.respond_error(req, ENOENT, fmt::format("parent: no bank '{}'", one_line(*settings->parent)));
        if (banks_.would_cycle(*name, *settings->parent))
            return broker_.respond_error(
                req, EINVAL,
                fmt::format("parent: bank '{}' is '{}' or below it: that would make a cycle", *settings->parent, *name));
    }
    bank->parent = settings->parent.value_or(bank->parent);
    bank->shares = settings->shares.value_or(bank->shares);
    bank->limits = settings->limits.value_or(bank->limits);
    commit(req, {.bank = bank->name, .row = *bank, .userid = {}, .rows = {}});
}

void AccountingService::on_bank_remove(const Message& req, const nlohmann::json& body) {
    auto name = read_bank_name(body, "name", req.topic);
    if (!name)
        return broker_.respond_error(req, EINVAL, name.error().message);
    auto it = std::find_if(banks_.banks.begin(), banks_.banks.end(), [&](const Bank& b) { return b.name == *name; });
    if (it == banks_.banks.end())
        return broker_.respond_error(req, ENOENT, fmt::format("bank '{}': no such bank", *name));
    for (const auto& b : banks_.banks)
        if (b.parent == *name)
            return broker_.respond_error(req, EBUSY,
                                         fmt::format("bank '{}' has the sub-bank '{}': remove or move it first", *name,
                                                     b.name));
    for (const auto& a : banks_.users)
        if (a.bank == *name)
            return broker_.respond_error(
                req, EBUSY, fmt::format("bank '{}' has users (uid {}): remove them from it first", *name, a.userid));
    banks_.banks.erase(it);
    commit(req, {.bank = *name, .row = {}, .userid = {}, .rows = {}});
}

void AccountingService::on_user_add(const Message& req, const nlohmann::json& body) {
    auto userid = read_userid(body, req.topic);
    auto bank = read_bank_name(body, "bank", req.topic);
    auto settings = read_settings(body, {}, req.topic);
    if (auto e = first_error(userid, bank, settings))
        return broker_.respond_error(req, EINVAL, e->message);
    if (settings->parent)
        return broker_.respond_error(req, EINVAL, "parent: users have banks, not parents");
    if (!banks_.find_bank(*bank))
        return broker_.respond_error(req, ENOENT, fmt::format("bank '{}': no such bank", *bank));
    if (banks_.find_user(*userid, *bank))
        return broker_.respond_error(req, EEXIST, fmt::format("uid {} is in bank '{}' already", *userid, *bank));
    bool first = std::none_of(banks_.users.begin(), banks_.users.end(),
                              [&](const Association& a) { return a.userid == *userid; });
    if (settings->is_default)
        for (auto& a : banks_.users)
            if (a.userid == *userid)
                a.is_default = false;
    Association a;
    a.userid = *userid;
    a.bank = *bank;
    a.is_default = first || settings->is_default;
    a.shares = settings->shares.value_or(1);
    a.limits = settings->limits.value_or(BankLimits{});
    banks_.users.push_back(a);
    commit(req, user_change(*userid));
}

// The association the request names (userid, bank); null once the
// request is answered why not.
Association* AccountingService::named_association(const Message& req, const nlohmann::json& body) {
    auto userid = read_userid(body, req.topic);
    auto bank = read_bank_name(body, "bank", req.topic);
    if (auto e = first_error(userid, bank)) {
        broker_.respond_error(req, EINVAL, e->message);
        return nullptr;
    }
    Association* a = banks_.find_user(*userid, *bank);
    if (!a)
        broker_.respond_error(req, ENOENT, fmt::format("uid {} is not in bank '{}'", *userid, *bank));
    return a;
}

void AccountingService::on_user_set(const Message& req, const nlohmann::json& body) {
    Association* a = named_association(req, body);
    if (!a)
        return;
    uint32_t userid = a->userid;
    auto settings = read_settings(body, a->limits, req.topic);
    if (!settings)
        return broker_.respond_error(req, EINVAL, settings.error().message);
    if (settings->parent)
        return broker_.respond_error(req, EINVAL, "parent: users have banks, not parents");
    if (settings->is_default)
        for (auto& other : banks_.users)
            if (other.userid == userid)
                other.is_default = &other == a;
    a->shares = settings->shares.value_or(a->shares);
    a->limits = settings->limits.value_or(a->limits);
    commit(req, user_change(userid));
}

void AccountingService::on_user_remove(const Message& req, const nlohmann::json& body) {
    Association* a = named_association(req, body);
    if (!a)
        return;
    uint32_t userid = a->userid;
    bool was_default = a->is_default;
    banks_.users.erase(banks_.users.begin() + (a - banks_.users.data()));
    if (was_default) {  // to their first other bank, by name
        Association* next = nullptr;
        for (auto& other : banks_.users)
            if (other.userid == userid && (!next || other.bank < next->bank))
                next = &other;
        if (next)
            next->is_default = true;
    }
    commit(req, user_change(userid));
}

}  // namespace banyan
