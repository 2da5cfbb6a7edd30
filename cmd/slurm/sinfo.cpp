// sinfo (partitions and nodes, sinfo(1)) and sacctmgr's read-only `show`
// (sacctmgr(1)): Banyan's queues are Slurm's partitions, its banks
// Slurm's accounts.
#include <map>

#include <fmt/format.h>

#include "cmd/slurm/commands.hpp"
#include "cmd/slurm/slurm_format.hpp"
#include "cmd/slurm/slurm_jobs.hpp"
#include "core/hostlist.hpp"

namespace banyan::cli::slurm {

SlurmNodes load_nodes(Client& client) {
    SlurmNodes out;
    auto answer = must(client.rpc("resource.nodes", nlohmann::json::object(), 0));
    for (const auto& n : answer_field<nlohmann::json>(answer, "nodes", nlohmann::json::array())) {
        const char* at = "resource.nodes";
        SlurmNode node;
        node.hostname = must(json_field<std::string>(n, "hostname", "", at));
        node.cores = must(json_field<uint64_t>(n, "cores", 0, at));
        node.cores_used = must(json_field<uint64_t>(n, "cores_used", 0, at));
        node.gpus = must(json_field<uint64_t>(n, "gpus", 0, at));
        node.reason = must(json_field<std::string>(n, "reason", "", at));
        std::string state = must(json_field<std::string>(n, "state", "", at));
        node.state = state == "drained"    ? "DRAINED"
                     : state == "draining" ? "DRAINING"
                     : state == "offline"  ? "DOWN"
                     : node.cores_used == 0 ? "IDLE"
                     : node.cores_used >= node.cores ? "ALLOCATED"
                                                     : "MIXED";
        if (state == "torpid")
            node.state += "*";  // not responding, as Slurm marks it
        out.nodes.push_back(std::move(node));
    }
    auto queues = must(client.rpc("job-manager.queue-list", nlohmann::json::object(), 0));
    for (const auto& q : answer_field<nlohmann::json>(queues, "queues", nlohmann::json::array())) {
        const char* at = "job-manager.queue-list";
        SlurmPartition p;
        p.name = must(json_field<std::string>(q, "name", "", at));
        p.is_default = must(json_field<bool>(q, "default", false, at));
        p.enabled = must(json_field<bool>(q, "enabled", true, at));
        p.max_time = must(json_field<double>(q, "max-duration", 0.0, at));
        out.partitions.push_back(std::move(p));
    }
    // An instance without queues is one partition, with no name to give
    // sbatch -p: it is not marked default, so tools submit without -p.
    if (out.partitions.empty())
        out.partitions.push_back({.name = "(none)", .is_default = false, .enabled = true, .max_time = 0});
    return out;
}

std::string short_node_state(const std::string& state) {
    static const std::map<std::string, std::string> names = {{"IDLE", "idle"},       {"ALLOCATED", "alloc"},
                                                            {"MIXED", "mix"},        {"DRAINED", "drain"},
                                                            {"DRAINING", "drng"},    {"DOWN", "down"}};
    std::string base = state.ends_with("*") ? state.substr(0, state.size() - 1) : state;
    auto it = names.find(base);
    return (it == names.end() ? base : it->second) + (state.ends_with("*") ? "*" : "");
}

int sinfo(const Args& args) {
    CLI::App app("sinfo: Banyan's queues and nodes as Slurm's sinfo shows them", "sinfo");
    app.set_help_flag("--help");
    bool no_header = false, node_oriented = false, summarize = false;
    std::string format, partition;
    app.add_flag("-h,--noheader", no_header, "no header line");
    app.add_option("-o,--format", format, "Slurm's format: %[.][size]type");
    app.add_flag("-N,--Node", node_oriented, "a line per node");
    app.add_flag("-s,--summarize", summarize, "partitions only, nodes counted as A/I/O/T");
    app.add_option("-p,--partition", partition, "this partition only");
    if (!parse_or_help(app, args))
        return 0;
    if (format.empty())
        format = summarize      ? "%9P %.5a %.10l %.16F  %N"
                 : node_oriented ? "%N %.6D %9P %6t"
                                 : "%9P %.5a %.10l %.6D %.6t %N";
    SlurmFormat layout(format, "PalDtTNcFmG");
    Client client = connect_to_instance();
    SlurmNodes all = load_nodes(client);
    static const std::map<char, std::string> titles = {
        {'P', "PARTITION"}, {'a', "AVAIL"}, {'l', "TIMELIMIT"}, {'D', "NODES"},   {'t', "STATE"}, {'T', "STATE"},
        {'N', "NODELIST"},  {'c', "CPUS"},  {'F', "NODES(A/I/O/T)"}, {'m', "MEMORY"}, {'G', "GRES"}};
    std::string out;
    if (!no_header)
        out += layout.header(titles) + "\n";
    for (const auto& p : all.partitions) {
        if (!partition.empty() && p.name != partition)
            continue;
        // A line per group of nodes in one state (per node with -N; per
        // partition with -s).
        std::vector<std::pair<std::string, std::vector<const SlurmNode*>>> groups;
        for (const auto& n : all.nodes) {
            std::string key = node_oriented ? n.hostname : summarize ? "" : n.state;
            auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == key; });
            if (it == groups.end())
                groups.push_back({key, {&n}});
            else
                it->second.push_back(&n);
        }
        for (const auto& [key, nodes] : groups) {
            HostList hosts;
            uint64_t allocated = 0, idle = 0, other = 0;
            for (const auto* n : nodes) {
                hosts.append(n->hostname);
                (n->state == "ALLOCATED" || n->state == "MIXED" ? allocated : n->state == "IDLE" ? idle : other)++;
            }
            const SlurmNode& first = *nodes.front();
            out += layout.render([&](char type) -> std::string {
                switch (type) {
                    case 'P':
                        return p.name + (p.is_default ? "*" : "");
                    case 'a':
                        return p.enabled ? "up" : "down";
                    case 'l':
                        return slurm_limit(p.max_time);
                    case 'D':
                        return std::to_string(nodes.size());
                    case 't':
                        return short_node_state(first.state);
                    case 'T':
                        return [&] {
                            std::string lower;
                            for (char c : first.state)
                                lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
                            return lower;
                        }();
                    case 'N':
                        return hosts.format();
                    case 'c':
                        return std::to_string(first.cores);
                    case 'F':
                        return fmt::format("{}/{}/{}/{}", allocated, idle, other, nodes.size());
                    case 'm':
                        return "0";
                    case 'G':
                        return first.gpus > 0 ? fmt::format("gpu:{}", first.gpus) : "(null)";
                }
                return "";
            }) + "\n";
        }
    }
    fmt::print("{}", out);
    return 0;
}

int sacctmgr(const Args& args) {
    // sacctmgr [-n] [-P] [-s] show|list user|account|association [NAME] [format=F,...]
    bool no_header = false, parsable = false, trailing = false;
    std::vector<std::string> words;
    for (const auto& a : args) {
        if (a == "-n" || a == "--noheader")
            no_header = true;
        else if (a == "-P" || a == "--parsable2")
            parsable = true;
        else if (a == "-p" || a == "--parsable")
            parsable = trailing = true;  // '|' after the last field too
        else if (a == "-s" || a == "--associations" || a == "-i" || a == "--immediate")
            continue;  // how Slurm shows them; Banyan shows banks' users always
        else if (a.starts_with("-"))
            fail(fmt::format("{}: not supported (banyan-slurm(7) lists what is)", a));
        else
            words.push_back(a);
    }
    if (words.size() < 2 || (words[0] != "show" && words[0] != "list"))
        fail("only 'show' and 'list' are offered (sacctmgr is read-only under Banyan: banyan bank changes banks)");
    std::string entity = words[1];
    std::string name, format;
    for (size_t i = 2; i < words.size(); i++) {
        std::string w = words[i];
        if (w.starts_with("format=") || w.starts_with("Format="))
            format = w.substr(7);
        else if (w.find('=') == std::string::npos)
            name = w;
        else
            fail(fmt::format("{}: not supported (name and format= are)", w));
    }
    if (entity != "user" && entity != "users" && entity != "account" && entity != "accounts" &&
        entity != "association" && entity != "associations")
        fail(fmt::format("show {}: not supported (user, account, association are)", entity));
    Client client = connect_to_instance();
    auto banks = must(client.rpc("accounting.banks", nlohmann::json::object(), 0));
    // Rows of (account, user): each bank, and each user of it.
    std::vector<std::pair<std::string, std::string>> rows;
    bool users_only = entity.starts_with("user");
    if (!users_only)
        for (const auto& b : answer_field<nlohmann::json>(banks, "banks", nlohmann::json::array()))
            rows.push_back({must(json_field<std::string>(b, "name", "", "accounting.banks")), ""});
    for (const auto& u : answer_field<nlohmann::json>(banks, "users", nlohmann::json::array()))
        rows.push_back({must(json_field<std::string>(u, "bank", "", "accounting.banks")),
                        user_name(must(json_field<uint32_t>(u, "userid", 0, "accounting.banks")))});
    if (format.empty())
        format = entity.starts_with("user") ? "User,Account" : "Account,User";
    std::vector<std::pair<std::string, size_t>> columns;
    for (const auto& f : split_commas(format)) {
        auto percent = f.find('%');
        std::string key = f.substr(0, percent);
        for (char& c : key)
            c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (key != "user" && key != "account")
            fail(fmt::format("format={}: only User and Account are offered", f));
        size_t width = 10;
        if (percent != std::string::npos) {
            std::string w = f.substr(percent + 1);
            if (w.empty() || w.size() > 4 || w.find_first_not_of("0123456789") != std::string::npos)
                fail(fmt::format("format={}: bad width", f));
            width = std::stoul(w);
        }
        columns.push_back({key, width});
    }
    std::string out;
    auto line = [&](const std::function<std::string(const std::string&)>& cell) {
        std::string text;
        for (size_t i = 0; i < columns.size(); i++)
            text += parsable ? cell(columns[i].first) + (trailing || i + 1 < columns.size() ? "|" : "")
                             : pad(cell(columns[i].first), columns[i].second, true) + " ";
        return text + "\n";
    };
    if (!no_header) {
        out += line([](const std::string& k) { return k == "user" ? std::string("User") : std::string("Account"); });
        if (!parsable)
            out += line([&](const std::string&) { return std::string(); });
    }
    for (const auto& [bank, user] : rows) {
        if (!name.empty() && (entity.starts_with("user") ? user : bank) != name)
            continue;
        out += line([&](const std::string& k) { return k == "user" ? user : bank; });
    }
    fmt::print("{}", out);
    return 0;
}

}  // namespace banyan::cli::slurm
