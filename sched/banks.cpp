#include "sched/banks.hpp"

#include <algorithm>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "core/json_field.hpp"

namespace banyan {
namespace {

constexpr int64_t kMaxLimit = 1000000000000;
// Decayed usage below this many core-seconds counts as none (§6).
constexpr double kNegligibleUsage = 1.0;

Result<BankLimits> limits_from(const nlohmann::json& j, std::string_view where) {
    BankLimits limits;
    if (auto r = limits.update(j, where); !r)
        return r.error();
    return limits;
}

}  // namespace

int64_t& BankLimits::at(size_t i) {
    std::array<int64_t*, kNames.size()> fields = {&max_running_jobs, &max_nodes,           &max_cores,
                                                  &max_gpus,         &max_run_core_minutes, &max_submit_jobs};
    return *fields.at(i);
}

nlohmann::json BankLimits::to_json() const {
    nlohmann::json j = nlohmann::json::object();
    for (size_t i = 0; i < kNames.size(); i++)
        j[std::string(kNames[i])] = at(i);
    return j;
}

Result<void> BankLimits::update(const nlohmann::json& j, std::string_view where) {
    if (!j.is_object())
        return make_error(EINVAL, fmt::format("{}: expected an object of limits", where));
    BankLimits next = *this;  // all or nothing
    for (const auto& [key, value] : j.items()) {
        auto known = std::find(kNames.begin(), kNames.end(), key);
        if (known == kNames.end())
            return make_error(EINVAL, fmt::format("{}.{}: not a limit (known: max-running-jobs, max-nodes, "
                                                  "max-cores, max-gpus, max-run-core-minutes, max-submit-jobs)",
                                                  where, one_line(key)));
        auto n = json_field<int64_t>(j, key, 0, where);
        if (!n)
            return make_error(EINVAL, n.error().message);
        if (*n < 0 || *n > kMaxLimit)
            return make_error(EINVAL, fmt::format("{}.{}: {} is not 0 (none) to {}", where, key, *n, kMaxLimit));
        next.at(static_cast<size_t>(known - kNames.begin())) = *n;
    }
    *this = next;
    return {};
}

Result<void> check_bank_name(std::string_view name) {
    bool ok = !name.empty() && name.size() <= 64 && name.front() != '-';
    for (char c : name)
        ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-');
    if (!ok)
        return make_error(EINVAL, fmt::format("bank '{}': a name is 1 to 64 letters, digits, '.', '_' or '-', "
                                              "not starting with '-'",
                                              one_line(name)));
    return {};
}

const Bank* BankTable::find_bank(std::string_view name) const {
    for (const auto& b : banks)
        if (b.name == name)
            return &b;
    return nullptr;
}

Bank* BankTable::find_bank(std::string_view name) {
    return const_cast<Bank*>(std::as_const(*this).find_bank(name));
}

const Association* BankTable::find_user(uint32_t userid, std::string_view bank) const {
    for (const auto& a : users)
        if (a.userid == userid && a.bank == bank)
            return &a;
    return nullptr;
}

Association* BankTable::find_user(uint32_t userid, std::string_view bank) {
    return const_cast<Association*>(std::as_const(*this).find_user(userid, bank));
}

bool BankTable::would_cycle(std::string_view bank, std::string_view parent) const {
    // Up from the parent: a cycle if it passes through `bank`. Bounded by
    // the number of banks, so a table that has a cycle already ends too.
    std::string_view at = parent;
    for (size_t steps = 0; !at.empty() && steps <= banks.size(); steps++) {
        if (at == bank)
            return true;
        const Bank* b = find_bank(at);
        if (!b)
            return false;
        at = b->parent;
    }
    return !at.empty();
}

nlohmann::json BankTable::to_json() const {
    nlohmann::json jb = nlohmann::json::array(), ju = nlohmann::json::array();
    for (const auto& b : banks)
        jb.push_back({{"name", b.name},
                      {"parent", b.parent},
                      {"shares", b.shares},
                      {"usage", b.usage},
                      {"limits", b.limits.to_json()}});
    for (const auto& a : users)
        ju.push_back({{"userid", a.userid},
                      {"bank", a.bank},
                      {"default", a.is_default},
                      {"shares", a.shares},
                      {"usage", a.usage},
                      {"fairshare", a.fairshare},
                      {"limits", a.limits.to_json()}});
    return {{"banks", std::move(jb)}, {"users", std::move(ju)}};
}

Result<BankTable> BankTable::from_json(const nlohmann::json& j) {
    BankTable t;
    for (const auto& b : json_array_at(j, "banks")) {
        auto name = json_field<std::string>(b, "name", "", "banks[]");
        auto parent = json_field<std::string>(b, "parent", "", "banks[]");
        auto shares = json_field<int64_t>(b, "shares", 1, "banks[]");
        auto usage = json_field<double>(b, "usage", 0, "banks[]");
        auto limits = limits_from(json_object_at(b, {"limits"}), "banks[].limits");
        if (auto e = first_error(name, parent, shares, usage, limits))
            return make_error(EPROTO, e->message);
        t.banks.push_back({*name, *parent, *shares, *limits, *usage});
    }
    for (const auto& a : json_array_at(j, "users")) {
        auto userid = json_field<uint32_t>(a, "userid", 0, "users[]");
        auto bank = json_field<std::string>(a, "bank", "", "users[]");
        auto is_default = json_field<bool>(a, "default", false, "users[]");
        auto shares = json_field<int64_t>(a, "shares", 1, "users[]");
        auto usage = json_field<double>(a, "usage", 0, "users[]");
        auto fairshare = json_field<double>(a, "fairshare", 0, "users[]");
        auto limits = limits_from(json_object_at(a, {"limits"}), "users[].limits");
        if (auto e = first_error(userid, bank, is_default, shares, usage, fairshare, limits))
            return make_error(EPROTO, e->message);
        t.users.push_back({*userid, *bank, *is_default, *shares, *limits, *usage, *fairshare});
    }
    return t;
}

namespace {

// One node of the tree as Fair Tree visits it: a bank or an association,
// with its level fair-share among its siblings.
struct Node {
    bool is_bank;
    size_t index;
    double level = 0;
};

class FairTree {
  public:
    explicit FairTree(BankTable& t) : t_(t) {
        std::map<std::string, size_t, std::less<>> index;
        for (size_t i = 0; i < t_.banks.size(); i++)
            index.emplace(t_.banks[i].name, i);
        bank_children_.resize(t_.banks.size());
        for (size_t i = 0; i < t_.banks.size(); i++) {
            auto p = index.find(t_.banks[i].parent);
            (p == index.end() ? top_ : bank_children_[p->second]).push_back({true, i});
        }
        for (size_t i = 0; i < t_.users.size(); i++) {
            auto& a = t_.users[i];
            if (a.usage < kNegligibleUsage)
                a.usage = 0;
            a.fairshare = 0;
            if (auto b = index.find(a.bank); b != index.end()) {
                bank_children_[b->second].push_back({false, i});
                total_users_++;
            }
        }
        for (auto& b : t_.banks)
            b.usage = -1;  // not yet summed
        for (size_t i = 0; i < t_.banks.size(); i++)
            subtree_usage(i, 0);
    }

    void run() {
        set_levels(top_);
        for (auto& children : bank_children_)
            set_levels(children);
        visit(top_);
        std::vector<Bank> banks;
        std::vector<Association> users;
        for (size_t i : bank_order_)
            banks.push_back(std::move(t_.banks[i]));
        for (size_t i : user_order_)
            users.push_back(std::move(t_.users[i]));
        std::vector<bool> visited(t_.users.size());
        for (size_t i : user_order_)
            visited[i] = true;
        for (size_t i = 0; i < t_.users.size(); i++)
            if (!visited[i])
                users.push_back(std::move(t_.users[i]));  // of an unknown bank
        t_.banks = std::move(banks);
        t_.users = std::move(users);
    }

  private:
    double subtree_usage(size_t bank, size_t depth) {
        Bank& b = t_.banks[bank];
        if (b.usage >= 0 || depth > t_.banks.size())
            return std::max(b.usage, 0.0);  // summed, or a cycle (refused at every change; never summed twice)
        double sum = 0;
        for (const Node& n : bank_children_[bank])
            sum += n.is_bank ? subtree_usage(n.index, depth + 1) : t_.users[n.index].usage;
        b.usage = sum;
        return sum;
    }

    double shares_of(const Node& n) const {
        return static_cast<double>(n.is_bank ? t_.banks[n.index].shares : t_.users[n.index].shares);
    }
    double usage_of(const Node& n) const { return n.is_bank ? t_.banks[n.index].usage : t_.users[n.index].usage; }
    const std::string& name_of(const Node& n) const { return n.is_bank ? t_.banks[n.index].name : t_.users[n.index].bank; }

    // Level fair-share S / U of each sibling (S: its share of the
    // siblings' shares; U: of their usage).
    void set_levels(std::vector<Node>& siblings) {
        double shares = 0, usage = 0;
        for (const Node& n : siblings) {
            shares += shares_of(n);
            usage += usage_of(n);
        }
        for (Node& n : siblings) {
            double s = shares > 0 ? shares_of(n) / shares : 0;
            double u = usage > 0 ? usage_of(n) / usage : 0;
            n.level = s == 0 ? 0 : u == 0 ? std::numeric_limits<double>::infinity() : s / u;
        }
    }

    // Highest level first. Associations of one level share a rank; banks
    // of one level have their children merged and visited as one list.
    void visit(std::vector<Node> nodes) {
        std::stable_sort(nodes.begin(), nodes.end(), [this](const Node& a, const Node& b) {
            if (a.level != b.level)
                return a.level > b.level;
            if (a.is_bank != b.is_bank)
                return !a.is_bank;
            return a.is_bank ? name_of(a) < name_of(b) : t_.users[a.index].userid < t_.users[b.index].userid;
        });
        for (size_t i = 0; i < nodes.size();) {
            size_t end = i;
            while (end < nodes.size() && nodes[end].level == nodes[i].level)
                end++;
            size_t ranked = user_order_.size();
            double factor = total_users_ ? static_cast<double>(total_users_ - ranked) / total_users_ : 0;
            std::vector<Node> merged;
            for (size_t k = i; k < end; k++) {
                if (nodes[k].is_bank) {
                    bank_order_.push_back(nodes[k].index);
                    const auto& children = bank_children_[nodes[k].index];
                    merged.insert(merged.end(), children.begin(), children.end());
                } else {
                    t_.users[nodes[k].index].fairshare = factor;
                    user_order_.push_back(nodes[k].index);
                }
            }
            if (!merged.empty())
                visit(std::move(merged));
            i = end;
        }
    }

    BankTable& t_;
    std::vector<Node> top_;
    std::vector<std::vector<Node>> bank_children_;
    size_t total_users_ = 0;
    std::vector<size_t> bank_order_, user_order_;
};

}  // namespace

void fair_tree(BankTable& table) {
    FairTree(table).run();
}

}  // namespace banyan
