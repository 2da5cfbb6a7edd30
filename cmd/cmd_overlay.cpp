// banyan overlay status: the tree of brokers with each one's state.
#include <fmt/format.h>

#include "cmd/cli_util.hpp"
#include "core/idset.hpp"
#include "core/tree.hpp"

namespace banyan::cli {
namespace {

struct States {
    IdSet online, torpid, lost, offline;
};

// A rank's own state, or its subtree's: full, partial, degraded.
std::string state_of(uint32_t rank, const TreeShape& tree, const States& s) {
    if (s.lost.contains(rank))
        return "lost";
    if (s.offline.contains(rank))
        return "offline";
    if (s.torpid.contains(rank))
        return "torpid";
    bool degraded = false;
    bool partial = false;
    for (uint32_t d : tree.descendants(rank)) {
        degraded = degraded || s.lost.contains(d) || s.torpid.contains(d);
        partial = partial || s.offline.contains(d);
    }
    return degraded ? "degraded" : partial ? "partial" : "full";
}

void print_tree(uint32_t rank, const TreeShape& tree, const States& s, const std::string& prefix, bool last,
                bool root) {
    std::string branch = root ? "" : (last ? "└─ " : "├─ ");
    fmt::print("{}{}{}: {}\n", prefix, branch, rank, state_of(rank, tree, s));
    std::string child_prefix = root ? "" : prefix + (last ? "   " : "│  ");
    auto children = tree.children(rank);
    for (size_t i = 0; i < children.size(); i++)
        print_tree(children[i], tree, s, child_prefix, i + 1 == children.size(), false);
}

IdSet idset_field(const nlohmann::json& body, const char* key) {
    return IdSet::parse(body.value(key, "")).value_or(IdSet{});
}

}  // namespace

void add_overlay(CLI::App& app, int& exit_code) {
    auto* overlay = app.add_subcommand("overlay", "Inspect the tree of brokers");
    overlay->require_subcommand(1);
    auto* status = overlay->add_subcommand("status", "Show every broker's state, as a tree");
    static int64_t rank = 0;
    static bool json = false;
    static bool summary = false;
    status->add_option("-r,--rank", rank, "show the subtree under this rank (default 0)");
    status->add_flag("--json", json, "print the raw state sets as JSON");
    status->add_flag("-s,--summary", summary, "print only the state of each set of ranks");
    status->callback([&exit_code] {
        Client client = connect_to_instance();
        auto body = must(client.rpc("overlay.status", nlohmann::json::object(), static_cast<uint32_t>(rank)));
        if (json) {
            fmt::print("{}\n", body.dump());
            exit_code = 0;
            return;
        }
        States s{idset_field(body, "online"), idset_field(body, "torpid"), idset_field(body, "lost"),
                 idset_field(body, "offline")};
        TreeShape tree(answer_field<uint32_t>(body, "size", 1), answer_field<uint32_t>(body, "fanout", 2));
        if (summary) {
            for (auto [name, set] : {std::pair{"online", &s.online}, std::pair{"torpid", &s.torpid},
                                     std::pair{"lost", &s.lost}, std::pair{"offline", &s.offline}})
                if (!set->empty())
                    fmt::print("{}: {} ({})\n", name, set->format(), set->count());
        } else {
            print_tree(answer_field<uint32_t>(body, "rank", 0), tree, s, "", true, true);
        }
        exit_code = 0;
    });
}

}  // namespace banyan::cli
