// banyan-sched-query: the matcher offline, a drop-in for Fluxion's
// resource-query (doc/man/banyan-sched-query.md). Loads a graph, reads
// commands from stdin, prints matches in resource-query's formats.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "core/json_field.hpp"
#include "core/json_parse.hpp"
#include "core/text_file.hpp"
#include "resource/discovery.hpp"
#include "resource/grug.hpp"
#include "resource/synthetic.hpp"
#include "sched/query/query_format.hpp"

using namespace banyan;

namespace {

// "node:1024,socket:2,core:32" (the count of nodes first) as the
// synthetic-cluster form "node[0-1023]: socket:2,core:32".
std::string expand_compact_synthetic(const std::string& spec) {
    if (spec.rfind("node:", 0) != 0)
        return spec;
    size_t comma = spec.find(',');
    std::string count = spec.substr(5, comma == std::string::npos ? std::string::npos : comma - 5);
    std::string rest = comma == std::string::npos ? "" : spec.substr(comma + 1);
    long n = std::strtol(count.c_str(), nullptr, 10);
    if (n <= 0)
        return spec;
    return fmt::format("node[0-{}]: {}", n - 1, rest);
}

// As Fluxion's rv1exec reader: cluster0 -> node (named by the nodelist,
// id = rank) -> its cores and gpus, with no sockets between.
ResourceGraph graph_of_rv1exec(const Rv1& r) {
    ResourceGraph g("cluster");
    ResourceGraph::Vertex root = *g.root();
    size_t i = 0;
    for (const auto& [rank, children] : r.ranks) {
        auto rank32 = static_cast<int32_t>(rank);
        std::string host = i < r.nodelist.size() ? r.nodelist[i] : fmt::format("node{}", rank);
        ++i;
        auto node = g.add_vertex(root, "node", "node", rank, rank32, 1, "", host);
        children.cores.for_each([&](uint32_t id) { g.add_vertex(node, "core", "core", id, rank32); });
        children.gpus.for_each([&](uint32_t id) { g.add_vertex(node, "gpu", "gpu", id, rank32); });
    }
    return g;
}

Result<ResourceGraph> load_graph(const std::string& path, const std::string& format) {
    if (format == "synthetic") {
        auto nodes = parse_synthetic_cluster(expand_compact_synthetic(path));
        if (!nodes)
            return nodes.error();
        return ResourceGraph::from_nodes(*nodes);
    }
    if (format == "hwloc") {
        auto node = discover_node(0, "node0", DiscoveryOptions{.xml_path = path});
        if (!node)
            return node.error();
        return ResourceGraph::from_nodes({*node});
    }
    auto text = read_text_file(path);
    if (!text)
        return text.error();
    if (format == "grug")
        return read_grug(*text);
    auto parsed = parse_json(*text);
    if (!parsed)
        return make_error(EINVAL, fmt::format("{}: {}", path, parsed.error().message));
    const nlohmann::json& doc = *parsed;
    if (format == "jgf")
        return ResourceGraph::from_jgf(doc);
    if (format == "rv1exec") {
        // An R, or a document holding one under "R".
        bool wrapped = doc.is_object() && doc.contains("R") && !doc.contains("execution");
        auto r = Rv1::from_json(wrapped ? doc["R"] : doc);
        if (!r)
            return make_error(EINVAL, fmt::format("{}: {}", path, r.error().message));
        return graph_of_rv1exec(*r);
    }
    return make_error(EINVAL,
                      fmt::format("unknown load format '{}' (known: grug, jgf, hwloc, rv1exec, synthetic)", format));
}

class Session {
  public:
    Session(Matcher& matcher, QueryFormat format, bool elapse, std::ofstream* test_out)
        : matcher_(matcher), format_(format), elapse_(elapse), test_out_(test_out) {
        // Fluxion closes its set of resource types once the graph is
        // loaded: the graph's, and those it always knows.
        for (const char* t : {"cluster", "rack", "node", "socket", "core", "gpu", "slot"})
            known_types_.insert(t);
        for (TypeId t = 0; t < matcher_.pool().type_count(); ++t)
            known_types_.insert(std::string(matcher_.pool().type_name(t)));
    }

    // False on quit.
    bool run(const std::string& line);

  private:
    // As Fluxion's resource-query: match output goes to the -t file when
    // there is one, else to stdout; errors go to stderr; info, stat and the
    // -e counts to stdout.
    void out(const std::string& text) {
        if (test_out_)
            *test_out_ << text;
        else
            std::fputs(text.c_str(), stdout);
    }
    static void to_stdout(const std::string& text) { std::fputs(text.c_str(), stdout); }
    void error(const std::string& text) { std::fprintf(stderr, "%s\n", text.c_str()); }
    // False when the jobspec was not matched (multi-match stops there).
    bool match(const std::string& op_name, const std::string& path);
    std::string unknown_type(const std::vector<JobspecResource>& resources) const;
    void cancel(const std::string& id, bool stats);
    void partial_cancel(const std::string& id, const std::string& format, const std::string& path, bool stats);
    void info(const std::string& id);
    void find(const std::vector<std::string>& words);
    void set_status(const std::string& path, const std::string& status);
    void stat();
    std::optional<uint32_t> vertex_at(const std::string& path) const;

    Matcher& matcher_;
    QueryFormat format_;
    bool elapse_;
    std::ofstream* test_out_;
    std::set<std::string, std::less<>> known_types_;
    uint64_t next_jobid_ = 1;
    std::map<uint64_t, double> match_seconds_;
    size_t matched_ = 0;
};

bool Session::run(const std::string& raw) {
    std::string line = raw.substr(0, raw.find('#'));
    std::istringstream in(line);
    std::vector<std::string> words;
    for (std::string w; in >> w;)
        words.push_back(w);
    if (words.empty())
        return true;
    const std::string& cmd = words[0];
    if (cmd == "quit" || cmd == "q")
        return false;
    if (cmd == "match" || cmd == "multi-match") {
        // multi-match: two jobspecs or more, and it stops at the first
        // that is not matched.
        if (cmd == "match" ? words.size() != 3 : words.size() < 4)
            error("ERROR: malformed command");
        else
            for (size_t i = 2; i < words.size() && match(words[1], words[i]); ++i) {
            }
    } else if (cmd == "cancel" && (words.size() == 2 || (words.size() == 3 && words[2] == "stats")))
        cancel(words[1], words.size() == 3);
    else if (cmd == "partial-cancel" && (words.size() == 4 || (words.size() == 5 && words[4] == "stats")))
        partial_cancel(words[1], words[2], words[3], words.size() == 5);
    else if (cmd == "info" && words.size() == 2)
        info(words[1]);
    else if (cmd == "find" && words.size() >= 2)
        find(words);
    else if (cmd == "set-status" && words.size() == 3)
        set_status(words[1], words[2]);
    else if (cmd == "stat" && words.size() == 1)
        stat();
    else
        error(
            fmt::format("ERROR: bad command '{}' (commands: match OP JOBSPEC, multi-match OP JOBSPEC..., cancel "
                        "JOBID [stats], partial-cancel JOBID rv1exec|jgf FILE [stats], info JOBID, find EXPR, "
                        "set-status PATH up|down|drained, stat, quit)",
                        line.substr(line.find_first_not_of(" \t"))));
    return true;
}

bool Session::match(const std::string& op_name, const std::string& path) {
    auto op = match_op_from_name(op_name);
    if (!op) {
        error("ERROR: unknown subcmd " + op_name);
        return false;
    }
    auto text = read_text_file(path);
    if (!text) {
        error("ERROR: can't open " + path);
        return true;  // (multi-match goes on, as resource-query's)
    }
    bool satisfiability = *op == MatchOp::satisfiability;
    std::string frame = "INFO: =============================\n";
    auto jobspec = Jobspec::parse(*text);
    std::string unknown = jobspec ? unknown_type(jobspec->resources) : "";
    if (!jobspec || !unknown.empty()) {
        // As resource-query: the error, and the job found nothing; the
        // job id is not used up.
        error(fmt::format("match_allocate: ERROR: Jobspec error for {}: {}", next_jobid_,
                          jobspec ? std::string("Value of \"type\" must be a resource type known to fluxion")
                                  : jobspec.error().message));
        out(satisfiability ? frame + "INFO: Unsatisfiable request\n" + frame
                           : frame + "INFO: No matching resources found\n" +
                                 fmt::format("INFO: JOBID={}\n", next_jobid_) + frame);
        return false;
    }
    uint64_t jobid = satisfiability ? 0 : next_jobid_++;
    auto t0 = std::chrono::steady_clock::now();
    auto res = matcher_.match(*jobspec, *op, 0, jobid);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!res) {
        error("ERROR: " + res.error().message);
        return false;
    }
    std::string elapsed = fmt::format("INFO: ELAPSE={:.6f}\n", seconds);
    std::string visits = fmt::format("INFO: VISITS={}\n", res->visits);
    std::string text_out;
    if (satisfiability) {
        text_out = frame + (res->matched ? "INFO: Satisfiable request\n" : "INFO: Unsatisfiable request\n") + frame;
        out(text_out);
        if (elapse_)
            to_stdout(elapsed + visits);
        return res->matched;
    }
    if (res->matched) {
        ++matched_;
        match_seconds_[jobid] = seconds;
        text_out = format_claims(matcher_, res->claims, res->start, res->end, format_);
        text_out += frame + fmt::format("INFO: JOBID={}\n", jobid);
        text_out += fmt::format("INFO: RESOURCES={}\n", res->reserved ? "RESERVED" : "ALLOCATED");
        text_out += res->reserved ? fmt::format("INFO: SCHEDULED AT={}\n", res->start) : "INFO: SCHEDULED AT=Now\n";
        out(text_out);
        if (elapse_)
            to_stdout(elapsed + visits);
        out(frame);
        return true;
    }
    // A plain allocate only says it found nothing now: Fluxion asks
    // whether the request could ever be met only for the other operations.
    text_out = frame + "INFO: No matching resources found\n";
    if (res->unsatisfiable && *op != MatchOp::allocate)
        text_out += "INFO: Unsatisfiable request\n";
    text_out += fmt::format("INFO: JOBID={}\n", jobid);
    if (elapse_)
        text_out += elapsed;
    out(text_out);
    if (elapse_)
        to_stdout(visits);
    out(frame);
    return false;
}

// The first type in `resources` (depth first) that the graph does not
// have and Fluxion does not know; "" if none.
std::string Session::unknown_type(const std::vector<JobspecResource>& resources) const {
    for (const auto& r : resources) {
        if (!known_types_.count(r.type))
            return r.type;
        if (std::string below = unknown_type(r.with); !below.empty())
            return below;
    }
    return "";
}

void Session::cancel(const std::string& id, bool stats) {
    uint64_t jobid = std::strtoull(id.c_str(), nullptr, 10);
    const Matcher::Job* job = matcher_.job(jobid);
    if (!job)
        return error(fmt::format("ERROR: nonexistent job {}", jobid));
    // Fluxion's cancel walk enters the root and every child of each vertex
    // the job holds (preorder), and leaves each vertex it holds (postorder).
    const ResourcePool& pool = matcher_.pool();
    size_t preorder = 1, postorder = 0;
    for (const Claim& c : job->claims)
        if (c.shown) {
            ++postorder;
            preorder += pool.children(c.vertex).size();
        }
    if (auto r = matcher_.cancel(jobid); !r)
        return error(fmt::format("cancel: ERROR: {}", r.error().message));
    if (stats) {
        std::string frame = "INFO: =============================\n";
        out(frame +
            fmt::format("INFO: CANCEL PREORDER COUNT=\"{}\"\nINFO: CANCEL POSTORDER COUNT=\"{}\"\n", preorder,
                        postorder) +
            frame);
    }
}

// The ranks a partial cancel names: R's R_lite ranks (rv1exec) or the
// ranks of a JGF's vertices.
Result<IdSet> ranks_in(const std::string& format, const std::string& path) {
    auto text = read_text_file(path);
    if (!text)
        return text.error();
    auto doc = parse_json(*text);
    if (!doc)
        return make_error(EINVAL, fmt::format("{}: {}", path, doc.error().message));
    IdSet ranks;
    if (format == "rv1exec") {
        // Only the ranks matter; R_lite may name types beyond cores and gpus.
        auto lite = json_field(json_object_at(*doc, {"execution"}), "R_lite", nlohmann::json::array(), "execution");
        if (!lite)
            return make_error(EINVAL, fmt::format("{}: {}", path, lite.error().message));
        for (const auto& entry : *lite) {
            auto rank_text = json_field<std::string>(entry, "rank", "", "execution.R_lite[]");
            if (!rank_text)
                return make_error(EINVAL, fmt::format("{}: {}", path, rank_text.error().message));
            auto set = IdSet::parse(*rank_text);
            if (!set)
                return make_error(EINVAL, fmt::format("{}: execution.R_lite[].rank: {}", path, set.error().message));
            ranks = ranks.union_with(*set);
        }
        return ranks;
    }
    if (format != "jgf")
        return make_error(EINVAL, fmt::format("unknown format '{}' (known: rv1exec, jgf)", format));
    const nlohmann::json& graph = json_object_at(*doc, {"graph"});
    auto nodes = json_field(graph, "nodes", nlohmann::json::array(), "graph");
    if (!nodes)
        return make_error(EINVAL, fmt::format("{}: {}", path, nodes.error().message));
    for (const auto& node : *nodes) {
        auto rank = json_field<int64_t>(json_object_at(node, {"metadata"}), "rank", -1, "graph.nodes[].metadata");
        if (!rank)
            return make_error(EINVAL, fmt::format("{}: {}", path, rank.error().message));
        if (*rank >= 0 && *rank <= std::numeric_limits<uint32_t>::max())
            ranks.insert(static_cast<uint32_t>(*rank));
    }
    return ranks;
}

void Session::partial_cancel(const std::string& id, const std::string& format, const std::string& path, bool stats) {
    uint64_t jobid = std::strtoull(id.c_str(), nullptr, 10);
    auto ranks = ranks_in(format, path);
    if (!ranks)
        return error(fmt::format("partial-cancel: ERROR: {}", ranks.error().message));
    if (auto r = matcher_.cancel_ranks(jobid, *ranks); !r)
        return error(fmt::format("partial-cancel: ERROR: {}", r.error().message));
    // Fluxion counts no walk for a partial cancel.
    if (stats)
        out("INFO: =============================\nINFO: PARTIAL CANCEL PREORDER COUNT=\"0\"\n"
            "INFO: PARTIAL CANCEL POSTORDER COUNT=\"0\"\nINFO: =============================\n");
}

void Session::info(const std::string& id) {
    uint64_t jobid = std::strtoull(id.c_str(), nullptr, 10);
    const Matcher::Job* job = matcher_.job(jobid);
    if (!job)
        return to_stdout(fmt::format("ERROR: jobid doesn't exist: {}\n", id));
    std::fputs(fmt::format("INFO: {}, {}, {}, {:.6f}\n", jobid, job->reserved ? "RESERVED" : "ALLOCATED", job->start,
                           match_seconds_.count(jobid) ? match_seconds_[jobid] : 0.0)
                   .c_str(),
               stdout);
}

void Session::stat() {
    double total = 0, least = 0, most = 0;
    for (const auto& [jobid, s] : match_seconds_) {
        least = total == 0 ? s : std::min(least, s);
        most = std::max(most, s);
        total += s;
    }
    to_stdout(fmt::format("INFO: Num. of Jobs Matched: {}\nINFO: Min. Match Time: {:g}\nINFO: Max. Match Time: "
                          "{:g}\nINFO: Avg. Match Time: {:g}\n",
                          matched_, least, most, matched_ ? total / static_cast<double>(match_seconds_.size()) : 0.0));
}

std::optional<uint32_t> Session::vertex_at(const std::string& path) const {
    const ResourcePool& pool = matcher_.pool();
    std::vector<std::string> parts;
    std::istringstream in(path);
    for (std::string p; std::getline(in, p, '/');)
        if (!p.empty())
            parts.push_back(p);
    std::span<const uint32_t> level = pool.roots();
    std::optional<uint32_t> found;
    for (const auto& part : parts) {
        found.reset();
        for (uint32_t v : level)
            if (pool.name(v) == part)
                found = v;
        if (!found)
            return std::nullopt;
        level = pool.children(*found);
    }
    return found;
}

void Session::set_status(const std::string& path, const std::string& status) {
    auto v = vertex_at(path);
    if (!v)
        return error(fmt::format("set-status: ERROR: no vertex at {}", path));
    VertexStatus s;
    if (status == "up")
        s = VertexStatus::up;
    else if (status == "down")
        s = VertexStatus::down;
    else if (status == "drained")
        s = VertexStatus::drained;
    else
        return error(fmt::format("set-status: ERROR: status '{}' (known: up, down, drained)", status));
    for (uint32_t d = *v; d < matcher_.pool().subtree_end(*v); ++d)
        matcher_.pool().set_status(d, s);
}

// find status=up|down|drained, sched-now=allocated|free,
// sched-future=reserved|free, type=T; joined by "and" / "or", left to right.
void Session::find(const std::vector<std::string>& words) {
    const ResourcePool& pool = matcher_.pool();
    std::vector<bool> allocated(pool.size(), false), reserved(pool.size(), false);
    for (const auto& [jobid, job] : matcher_.jobs())
        for (const Claim& c : job.claims)
            if (c.consumes)
                (job.reserved ? reserved : allocated)[c.vertex] = true;
    auto test = [&](const std::string& term, uint32_t v) -> std::optional<bool> {
        size_t eq = term.find('=');
        if (eq == std::string::npos)
            return std::nullopt;
        std::string key = term.substr(0, eq), value = term.substr(eq + 1);
        if (key == "status" && (value == "up" || value == "down" || value == "drained"))
            return (value == "up" && pool.status(v) == VertexStatus::up) ||
                   (value == "down" && pool.status(v) == VertexStatus::down) ||
                   (value == "drained" && pool.status(v) == VertexStatus::drained);
        if (key == "sched-now" && (value == "allocated" || value == "free"))
            return allocated[v] == (value == "allocated");
        if (key == "sched-future" && (value == "reserved" || value == "free"))
            return reserved[v] == (value == "reserved");
        if (key == "type")
            return pool.type_name(pool.type(v)) == value;
        if (key == "jobid-span" || key == "jobid-tag") {
            // tag: the vertex is part of the job's match; span: as Fluxion,
            // where only vertices above the leaves keep subtree spans.
            const Matcher::Job* job = matcher_.job(std::strtoull(value.c_str(), nullptr, 10));
            return job && (key == "jobid-tag" || !pool.is_leaf(v)) &&
                   std::any_of(job->claims.begin(), job->claims.end(),
                               [&](const Claim& c) { return c.vertex == v && c.shown; });
        }
        return std::nullopt;
    };
    std::vector<Claim> claims;
    std::vector<bool> added(pool.size(), false);
    for (uint32_t v = 0; v < pool.size(); ++v) {
        std::optional<bool> result;
        std::string join = "and";
        for (size_t i = 1; i < words.size(); ++i) {
            if (words[i] == "and" || words[i] == "or") {
                join = words[i];
                continue;
            }
            auto t = test(words[i], v);
            if (!t)
                return error(
                    fmt::format("find: ERROR: bad criterion '{}' (status=up|down|drained, "
                                "sched-now=allocated|free, sched-future=reserved|free, type=T, "
                                "jobid-span=ID, jobid-tag=ID)",
                                words[i]));
            result = !result ? *t : join == "and" ? (*result && *t) : (*result || *t);
        }
        if (!result.value_or(false))
            continue;
        // The vertex and its ancestors, so the listing reads as a tree;
        // Fluxion marks every vertex a find lists x.
        for (uint32_t a = v; a != kNoVertex && !added[a]; a = pool.parent(a)) {
            added[a] = true;
            claims.push_back({a, a == v && pool.is_leaf(a) ? pool.vertex_size(a) : 1, true, false, true});
        }
    }
    out(format_claims(matcher_, claims, 0, 0, format_) + "INFO: =============================\n" +
        fmt::format("INFO: EXPRESSION=\"{}\"\n", fmt::join(words.begin() + 1, words.end(), " ")) +
        "INFO: =============================\n");
}

}  // namespace

// -p/--prune-filters as resource-query's getopt takes them: a value that is
// blank keeps the default, and each given adds to the list. Taken out of
// the arguments here (CLI11 would read `-p ""` as the next option's value).
std::vector<std::string> take_prune_filters(int argc, char** argv, std::string& filters) {
    std::vector<std::string> rest;
    auto add = [&filters](std::string value) {
        if (value.find_first_not_of(" \t") == std::string::npos)
            return;
        filters += (filters.empty() ? "" : ",") + value;
    };
    for (int i = 0; i < argc; ++i) {
        std::string a = argv[i];
        if ((a == "-p" || a == "--prune-filters") && i + 1 < argc)
            add(argv[++i]);
        else if (a.starts_with("--prune-filters="))
            add(a.substr(16));
        else if (a.starts_with("-p") && a.size() > 2 && !a.starts_with("--"))
            add(a.substr(2));
        else
            rest.push_back(std::move(a));
    }
    return rest;
}

int main(int argc, char** argv) {
    CLI::App app("banyan-sched-query: match jobspecs on a resource graph, commands from stdin", "banyan-sched-query");
    std::string load_file, load_format = "grug", subsystems = "CA", policy_name = "first", format_name = "simple",
                           test_output, prune_filters;
    bool elapse = false, no_prompt = false;
    app.add_option("-L,--load-file", load_file, "resource graph (a file; the spec itself for -f synthetic)")
        ->required();
    app.add_option("-f,--load-format", load_format, "grug (default), jgf, hwloc, rv1exec or synthetic");
    app.add_option("-S,--match-subsystems", subsystems, "subsystems to match: CA (containment)");
    app.add_option("-P,--match-policy", policy_name,
                   "first (default), low, high, lonode, hinode, lonodex, "
                   "hinodex, locality");
    app.add_option("-F,--match-format", format_name, "simple (default), pretty_simple, jgf, rv1, rv1_nosched");
    app.add_option("-p,--prune-filters", prune_filters,
                   "Fluxion's pruning filters, e.g. ALL:core,ALL:node (given again: added; blank: the default): "
                   "accepted and checked; every vertex here keeps an aggregate of each type below it, which is "
                   "every filter at once");
    app.add_option("-t,--test-output", test_output, "write the match output to this file instead of stdout");
    app.add_flag("-e,--elapse-time", elapse, "print the time and vertex visits of each match");
    app.add_flag("-d,--disable-prompt", no_prompt, "no prompt");
    std::vector<std::string> args = take_prune_filters(argc, argv, prune_filters);
    try {
        std::vector<std::string> reversed(args.rbegin(), args.rend());
        if (!reversed.empty())
            reversed.pop_back();  // the program's name
        app.parse(reversed);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    auto die = [](const std::string& message) {
        std::fprintf(stderr, "banyan-sched-query: %s\n", message.c_str());
        return 1;
    };
    if (subsystems != "CA" && subsystems != "C")
        return die(fmt::format("-S {}: only the containment subsystem (CA) is modelled", subsystems));
    for (size_t at = 0; !prune_filters.empty() && at <= prune_filters.size();) {
        size_t comma = std::min(prune_filters.find(',', at), prune_filters.size());
        std::string item = prune_filters.substr(at, comma - at);
        size_t colon = item.find(':');
        if (colon == 0 || colon == std::string::npos || colon + 1 == item.size() ||
            item.find(':', colon + 1) != std::string::npos)
            return die(fmt::format("--prune-filters: '{}' is not HIGH-TYPE:LOW-TYPE (e.g. ALL:core)", item));
        at = comma + 1;
    }
    auto policy = MatchPolicy::create(policy_name);
    if (!policy)
        return die("-P " + policy.error().message);
    auto format = query_format_from_name(format_name);
    if (!format)
        return die("-F " + format.error().message);
    std::unique_ptr<Matcher> matcher;
    {
        // The pool holds its own copy: the graph goes at the end of the block.
        auto graph = load_graph(load_file, load_format);
        if (!graph)
            return die(fmt::format("-L {}: {}", load_file, graph.error().message));
        matcher = std::make_unique<Matcher>(*graph, std::move(*policy));
    }
    std::ofstream test_out;
    if (!test_output.empty()) {
        test_out.open(test_output);
        if (!test_out)
            return die(fmt::format("-t {}: cannot write", test_output));
    }
    Session session(*matcher, *format, elapse, test_output.empty() ? nullptr : &test_out);
    for (std::string line;;) {
        if (!no_prompt) {
            std::fputs("banyan-sched-query> ", stdout);
            std::fflush(stdout);
        }
        if (!std::getline(std::cin, line) || !session.run(line))
            break;
    }
    return 0;
}
