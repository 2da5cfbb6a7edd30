// banyan bank add|set|remove|list|show|user add|user set|user remove: the
// banks jobs are charged to, their users, shares and limits
// (doc/spec/accounting.md §5-9). Changes are the instance owner's; anyone
// may look.
#include <algorithm>
#include <array>
#include <functional>
#include <map>

#include <fmt/format.h>

#include "cmd/cli_util.hpp"
#include "core/json_field.hpp"
#include "sched/banks.hpp"

namespace banyan::cli {
namespace {

// Decayed core-seconds as core-hours.
std::string core_hours(double seconds) {
    return fmt::format("{:.1f}", seconds / 3600);
}

std::string limits_text(const BankLimits& limits) {
    std::string out;
    for (size_t i = 0; i < BankLimits::kNames.size(); i++)
        if (limits.at(i) > 0)
            out += fmt::format("{}{}={}", out.empty() ? "" : ",", BankLimits::kNames[i], limits.at(i));
    return out.empty() ? "-" : out;
}

BankTable fetch(Client& client) {
    return must(BankTable::from_json(must(client.rpc("accounting.banks", nlohmann::json::object(), 0))));
}

void print_tree(const BankTable& t) {
    std::map<std::string, std::vector<const Bank*>> children;  // by parent, then name
    std::map<std::string, int> users;
    for (const auto& b : t.banks)
        children[b.parent].push_back(&b);
    for (auto& [parent, list] : children)
        std::sort(list.begin(), list.end(), [](const Bank* a, const Bank* b) { return a->name < b->name; });
    for (const auto& a : t.users)
        users[a.bank]++;
    fmt::print("{:<24} {:>8} {:>12} {:>6} {}\n", "BANK", "SHARES", "CORE-HOURS", "USERS", "LIMITS");
    std::function<void(const std::string&, int)> print = [&](const std::string& parent, int depth) {
        auto it = children.find(parent);
        if (it == children.end() || depth > static_cast<int>(t.banks.size()))
            return;
        for (const Bank* b : it->second) {
            fmt::print("{:<24} {:>8} {:>12} {:>6} {}\n", std::string(2 * depth, ' ') + b->name, b->shares,
                       core_hours(b->usage), users[b->name], limits_text(b->limits));
            print(b->name, depth + 1);
        }
    };
    print("", 0);
}

void print_bank(const BankTable& t, const Bank& b) {
    fmt::print("bank {}: parent {}, shares {}, {} core-hours (decayed), limits {}\n", b.name,
               b.parent.empty() ? "-" : b.parent, b.shares, core_hours(b.usage), limits_text(b.limits));
    fmt::print("{:<12} {:>7} {:>8} {:>12} {:>9} {}\n", "USER", "DEFAULT", "SHARES", "CORE-HOURS", "FAIRSHARE",
               "LIMITS");
    for (const auto& a : t.users)
        if (a.bank == b.name)
            fmt::print("{:<12} {:>7} {:>8} {:>12} {:>9.3f} {}\n", user_name(a.userid), a.is_default ? "*" : "",
                       a.shares, core_hours(a.usage), a.fairshare, limits_text(a.limits));
}

// The options every add and set takes: shares and limits; only those
// given are sent.
struct Settings {
    std::string parent;
    int64_t shares = 1;
    std::array<int64_t, BankLimits::kNames.size()> limits{};
    CLI::Option* parent_opt = nullptr;
    CLI::Option* shares_opt = nullptr;
    std::array<CLI::Option*, BankLimits::kNames.size()> limit_opts{};
    bool is_default = false;

    void add_options(CLI::App* cmd, bool bank) {
        if (bank)
            parent_opt = cmd->add_option("--parent", parent, "the bank above this one (\"\": top level)");
        shares_opt = cmd->add_option("--shares", shares, "its shares among its siblings (0 to 1e9; default 1)");
        for (size_t i = 0; i < BankLimits::kNames.size(); i++)
            limit_opts[i] = cmd->add_option(fmt::format("--{}", BankLimits::kNames[i]), limits[i], "0: none");
        if (!bank)
            cmd->add_flag("--default", is_default, "make this the user's default bank");
    }
    nlohmann::json fields() const {
        nlohmann::json j = nlohmann::json::object();
        if (parent_opt && parent_opt->count())
            j["parent"] = parent;
        if (shares_opt->count())
            j["shares"] = shares;
        for (size_t i = 0; i < limits.size(); i++)
            if (limit_opts[i]->count())
                j["limits"][std::string(BankLimits::kNames[i])] = limits[i];
        if (is_default)
            j["default"] = true;
        return j;
    }
};

}  // namespace

void add_bank(CLI::App& app, int& exit_code) {
    auto* bank = app.add_subcommand("bank", "Banks jobs are charged to: users, shares, limits, fair-share");
    bank->require_subcommand(1);
    static std::string name, user;
    static bool json = false;

    auto* list = bank->add_subcommand("list", "Every bank as a tree, with its shares, usage and limits");
    list->add_flag("--json", json, "print the tables as JSON (usage in core-seconds)");
    list->callback([&exit_code] {
        Client client = connect_to_instance();
        BankTable t = fetch(client);
        json ? fmt::print("{}\n", t.to_json().dump()) : print_tree(t);
        exit_code = 0;
    });
    auto* show = bank->add_subcommand("show", "One bank: its settings and its users' usage and fair-share");
    show->add_option("BANK", name, "the bank")->required();
    show->add_flag("--json", json, "print JSON");
    show->callback([&exit_code] {
        Client client = connect_to_instance();
        BankTable t = fetch(client);
        const Bank* b = t.find_bank(name);
        if (!b)
            fail(fmt::format("bank show: bank '{}': no such bank", name));
        if (json) {
            nlohmann::json users = nlohmann::json::array();
            for (const auto& u : t.to_json()["users"])
                if (u["bank"] == name)
                    users.push_back(u);
            nlohmann::json j = BankTable{{*b}, {}}.to_json()["banks"][0];
            j["users"] = std::move(users);
            fmt::print("{}\n", j.dump());
        } else {
            print_bank(t, *b);
        }
        exit_code = 0;
    });

    // The changes (instance owner): of banks, and of users in banks. Each
    // sends the options given; one Settings each, as CLI11 binds them.
    static Settings settings[4];
    struct Change {
        const char* name;
        const char* help;
        const char* topic;
        Settings* settings;  // null: takes none
        bool of_user;
    };
    static const Change changes[] = {
        {"add", "Add a bank (instance owner)", "accounting.bank-add", &settings[0], false},
        {"set", "Change a bank's parent, shares or limits (instance owner)", "accounting.bank-set", &settings[1],
         false},
        {"remove", "Remove a bank with no sub-banks or users (instance owner)", "accounting.bank-remove", nullptr,
         false},
        {"add", "Let USER charge jobs to BANK (their first bank is their default)", "accounting.user-add",
         &settings[2], true},
        {"set", "Change USER's shares, limits or default in BANK", "accounting.user-set", &settings[3], true},
        {"remove", "Take BANK from USER (their running jobs go on)", "accounting.user-remove", nullptr, true},
    };
    CLI::App* users = nullptr;  // after the bank's own, as help lists them
    for (const Change& c : changes) {
        if (c.of_user && !users) {
            users = bank->add_subcommand("user", "Users of banks: add, set, remove (instance owner)");
            users->require_subcommand(1);
        }
        auto* sub = (c.of_user ? users : bank)->add_subcommand(c.name, c.help);
        if (c.of_user)
            sub->add_option("USER", user, "a user name or uid")->required();
        sub->add_option("BANK", name, c.of_user || std::string_view(c.name) != "add"
                                          ? "the bank"
                                          : "its name: letters, digits, '.', '_', '-'")
            ->required();
        if (c.settings)
            c.settings->add_options(sub, !c.of_user);
        sub->callback([&exit_code, &c] {
            Client client = connect_to_instance();
            nlohmann::json req = c.settings ? c.settings->fields() : nlohmann::json::object();
            if (c.of_user) {
                req["userid"] = uid_of_user(user, "USER");
                req["bank"] = name;
            } else {
                req["name"] = name;
            }
            must(client.rpc(c.topic, req, 0));
            exit_code = 0;
        });
    }
}

}  // namespace banyan::cli
