#include "cmd/slurm_options.hpp"

#include <cctype>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "core/byte_size.hpp"
#include "core/jobid.hpp"
#include "core/slurm_names.hpp"
#include "core/text.hpp"
#include "sched/array_spec.hpp"
#include "sched/constraint.hpp"

namespace banyan::cli {
namespace {

enum class Arg { none, required, optional };

// Which commands take an option (bits of SlurmCommand).
constexpr unsigned kDirective = 1, kSbatch = 2, kSrun = 4, kSalloc = 8;
constexpr unsigned kJob = kDirective | kSbatch | kSrun | kSalloc;  // every command's
constexpr unsigned kBatch = kDirective | kSbatch;

struct OptionSpec {
    const char* name;
    char short_name;  // 0: none
    Arg arg;
    unsigned commands;
};

// Slurm's options Banyan honours (doc/spec/slurm.md §2; banyan-slurm(7)).
// Any other is refused, never ignored.
constexpr OptionSpec kOptions[] = {
    {"nodes", 'N', Arg::required, kJob},
    {"ntasks", 'n', Arg::required, kJob},
    {"ntasks-per-node", 0, Arg::required, kJob},
    {"cpus-per-task", 'c', Arg::required, kJob},
    {"time", 't', Arg::required, kJob},
    {"job-name", 'J', Arg::required, kJob},
    {"output", 'o', Arg::required, kBatch | kSrun},
    {"error", 'e', Arg::required, kBatch | kSrun},
    {"input", 'i', Arg::required, kBatch | kSrun},
    {"chdir", 'D', Arg::required, kJob},
    {"mem", 0, Arg::required, kJob},
    {"mem-per-cpu", 0, Arg::required, kJob},
    {"gres", 0, Arg::required, kJob},
    {"gpus-per-task", 0, Arg::required, kJob},
    {"gpus", 'G', Arg::required, kJob},
    {"exclusive", 0, Arg::optional, kJob},
    {"partition", 'p', Arg::required, kJob},
    {"account", 'A', Arg::required, kJob},
    {"qos", 'q', Arg::required, kJob},
    {"dependency", 'd', Arg::required, kJob},
    {"array", 'a', Arg::required, kBatch},
    {"begin", 'b', Arg::required, kJob},
    {"signal", 0, Arg::required, kJob},
    {"requeue", 0, Arg::none, kBatch},
    {"no-requeue", 0, Arg::none, kBatch},
    {"export", 0, Arg::required, kJob},
    {"constraint", 'C', Arg::required, kJob},
    {"mail-type", 0, Arg::required, kJob},
    {"mail-user", 0, Arg::required, kJob},
    {"nodelist", 'w', Arg::required, kJob},
    {"exclude", 'x', Arg::required, kJob},
    {"hold", 'H', Arg::none, kBatch | kSrun | kSalloc},
    {"comment", 0, Arg::required, kJob},
    // Slurm's OCI bundle and Pyxis' image: one image (doc/spec/shell.md §9).
    {"container", 0, Arg::required, kJob},
    {"container-image", 0, Arg::required, kJob},
    {"container-mounts", 0, Arg::required, kJob},
    // The front ends' own (their callers read them with value()).
    {"wrap", 0, Arg::required, kSbatch},
    {"parsable", 0, Arg::none, kSbatch},
    {"wait", 'W', Arg::none, kSbatch},
    {"label", 'l', Arg::none, kSrun},
    {"pty", 0, Arg::none, kSrun},
    {"mpi", 0, Arg::required, kSrun},
    {"cpu-bind", 0, Arg::required, kSrun},
    {"unbuffered", 'u', Arg::none, kSrun},
};

const OptionSpec* find_long(std::string_view name) {
    for (const auto& o : kOptions)
        if (name == o.name)
            return &o;
    return nullptr;
}

const OptionSpec* find_short(char c) {
    for (const auto& o : kOptions)
        if (o.short_name == c)
            return &o;
    return nullptr;
}

// What a Slurm user may read to see what is supported.
constexpr const char* kSeeManual = "not supported (banyan-slurm(7) lists what is)";

bool is_count(const std::string& text) {
    return !text.empty() && text.size() <= 9 && text.find_first_not_of("0123456789") == std::string::npos;
}

// Slurm's memory size: a bare number is megabytes (sbatch(1) --mem).
Result<std::string> slurm_memory(const std::string& text) {
    std::string size = text;
    if (!size.empty() && std::isdigit(static_cast<unsigned char>(size.back())))
        size += "M";
    if (auto bytes = parse_byte_size(size, BareSize::refused); !bytes)
        return make_error(EINVAL, "expected a size: megabytes, or a number with K, M, G or T (4G)");
    return size;
}

// One dependency of Slurm's list: TYPE:ID[:ID...] or singleton.
Result<std::string> slurm_dependency(const std::string& term) {
    if (term == "singleton")
        return term;
    auto colon = term.find(':');
    std::string type = term.substr(0, colon);
    static const std::map<std::string, std::string> types = {
        {"after", "afterstart"}, {"afterok", "afterok"}, {"afternotok", "afternotok"}, {"afterany", "afterany"}};
    auto it = types.find(type);
    if (it == types.end())
        return make_error(EINVAL, fmt::format("'{}': {}; after, afterok, afternotok, afterany and singleton are",
                                              type, kSeeManual));
    if (colon == std::string::npos || colon + 1 == term.size())
        return make_error(EINVAL, fmt::format("'{}': expected {}:JOBID[:JOBID...]", term, type));
    std::string out = it->second;
    for (const std::string& id : split(term.substr(colon + 1), ':')) {
        if (id.find('+') != std::string::npos)
            return make_error(EINVAL, fmt::format("'{}': a delay (+TIME) is {}", id, kSeeManual));
        // Slurm's element A_I is Banyan's A[I].
        std::string ref = id;
        if (auto under = id.find('_'); under != std::string::npos)
            ref = id.substr(0, under) + "[" + id.substr(under + 1) + "]";
        if (auto r = parse_job_ref(ref); !r)
            return make_error(EINVAL, fmt::format("'{}': not a job id", id));
        out += ":" + ref;
    }
    return out;
}

// --begin as sbatch takes it: now+N[seconds|minutes|hours|days|weeks],
// HH:MM[:SS], YYYY-MM-DD[THH:MM[:SS]].
Result<std::string> slurm_begin(const std::string& text) {
    if (text.starts_with("now+")) {
        std::string rest = text.substr(4);
        size_t digits = rest.find_first_not_of("0123456789");
        std::string number = rest.substr(0, digits), unit = digits == std::string::npos ? "" : rest.substr(digits);
        static const std::map<std::string, std::string> units = {
            {"", "s"},        {"seconds", "s"}, {"second", "s"}, {"minutes", "m"}, {"minute", "m"},
            {"hours", "h"},   {"hour", "h"},    {"days", "d"},   {"day", "d"}};
        if (!is_count(number))
            return make_error(EINVAL, "expected now+COUNT[seconds|minutes|hours|days|weeks], COUNT at most 9 digits");
        if (unit == "weeks" || unit == "week")
            return "+" + std::to_string(std::stoull(number) * 7) + "d";
        auto it = units.find(unit);
        if (it == units.end())
            return make_error(EINVAL, fmt::format("'{}': expected seconds, minutes, hours, days or weeks", unit));
        return "+" + number + it->second;
    }
    if (text == "now")
        return std::string("now");
    bool clock = text.find(':') != std::string::npos && text.find('-') == std::string::npos;
    bool date = text.size() >= 10 && text[4] == '-' && text[7] == '-';
    if (!clock && !date)
        return make_error(EINVAL, fmt::format("'{}': {}; now+COUNT[UNITS], HH:MM[:SS] and "
                                              "YYYY-MM-DD[THH:MM[:SS]] are", text, kSeeManual));
    return text;
}

// -C as Slurm writes it: & and, | or; counts and brackets are not Banyan's.
Result<std::string> slurm_constraint(const std::string& text) {
    if (text.find_first_of("[]*") != std::string::npos)
        return make_error(EINVAL, fmt::format("counts and brackets ([a*2&b]) are {}", kSeeManual));
    std::string query = replace_all(replace_all(text, "&", " and "), "|", " or ");
    if (auto c = Constraint::parse_query(query); !c)
        return c.error();
    return query;
}

}  // namespace

std::string SlurmOptions::value(const std::string& name) const {
    auto it = given_.find(name);
    return it == given_.end() || it->second.values.empty() ? "" : it->second.values.back();
}

void SlurmOptions::overlay(const SlurmOptions& above) {
    for (const auto& [name, given] : above.given_)
        given_[name] = given;
    instance_ = instance_ || above.instance_;
}

Result<size_t> SlurmOptions::parse(const std::vector<std::string>& words, SlurmCommand command,
                                   const std::string& where) {
    const unsigned bit = 1u << static_cast<unsigned>(command);
    instance_ = instance_ || command == SlurmCommand::directive || command == SlurmCommand::sbatch ||
                command == SlurmCommand::salloc;
    auto prefix = [&](const std::string& text) { return where.empty() ? text : where + " " + text; };
    size_t i = 0;
    while (i < words.size()) {
        const std::string& word = words[i];
        if (word == "--")
            return i + 1;
        if (word.size() < 2 || word[0] != '-')
            return i;
        const OptionSpec* spec = nullptr;
        std::string value, written = word;
        bool has_value = false;
        if (word.starts_with("--")) {
            auto eq = word.find('=');
            spec = find_long(word.substr(2, eq == std::string::npos ? std::string::npos : eq - 2));
            if (eq != std::string::npos) {
                value = word.substr(eq + 1);
                has_value = true;
            }
        } else {
            spec = find_short(word[1]);
            if (spec && word.size() > 2) {
                if (spec->arg == Arg::none)
                    return make_error(EINVAL, fmt::format("{}: give -{} alone", prefix(word), word[1]));
                value = word.substr(2);
                has_value = true;
            }
        }
        if (!spec || !(spec->commands & bit))
            return make_error(EINVAL, fmt::format("{}: {}", prefix(word),
                                                  spec && command == SlurmCommand::directive
                                                      ? "only on the command line, not in a script"
                                                      : kSeeManual));
        i++;
        if (spec->arg == Arg::required && !has_value) {
            if (i == words.size())
                return make_error(EINVAL, fmt::format("{}: needs a value", prefix(word)));
            value = words[i++];
            written += " " + value;
        }
        if (spec->arg == Arg::none && has_value)
            return make_error(EINVAL, fmt::format("{}: takes no value", prefix(word)));
        std::string name = spec->name;
        if (name == "no-requeue") {  // one setting, the last of the two wins
            name = "requeue";
            value = "no";
        }
        Given& g = given_[name];
        bool list = name == "export" || name == "dependency";
        if (!list)
            g.values.clear();
        g.values.push_back(value);
        g.where = prefix(written);
    }
    return i;
}

Result<std::vector<std::string>> SlurmOptions::banyan_words(bool complete) const {
    std::vector<std::string> out;
    auto bad = [this](const std::string& name, const std::string& why) {
        return make_error(EINVAL, fmt::format("{}: {}", given_.at(name).where, why));
    };
    auto count_of = [&](const std::string& name) -> Result<int64_t> {
        std::string v = value(name);
        if (!is_count(v) || std::stoll(v) == 0)
            return bad(name, "expected a positive whole number");
        return std::stoll(v);
    };
    int64_t nodes = 0, ntasks = 0;
    if (has("nodes")) {
        std::string v = value("nodes");
        if (auto dash = v.find('-'); dash != std::string::npos) {
            if (v.substr(0, dash) != v.substr(dash + 1))
                return bad("nodes", "a range of node counts (MIN-MAX) is " + std::string(kSeeManual) +
                                        "; give one count");
            v = v.substr(0, dash);
        }
        if (!is_count(v) || std::stoll(v) == 0)
            return bad("nodes", "expected a positive whole number");
        nodes = std::stoll(v);
        out.push_back(fmt::format("--nodes={}", nodes));
    }
    if (has("ntasks")) {
        auto n = count_of("ntasks");
        if (!n)
            return n.error();
        ntasks = *n;
    }
    if (has("ntasks-per-node")) {
        auto per = count_of("ntasks-per-node");
        if (!per)
            return per.error();
        if (nodes == 0 && complete)
            return bad("ntasks-per-node", "needs --nodes (-N): Banyan places a count of tasks, not tasks per node");
        if (nodes != 0 && ntasks != 0 && ntasks != nodes * *per)
            return bad("ntasks-per-node",
                       fmt::format("and --ntasks={} disagree ({} nodes); give one of them", ntasks, nodes));
        if (nodes != 0)  // else given with the node count, once complete
            ntasks = nodes * *per;
    }
    // Slurm's default: a task a node, on nodes shared with other jobs
    // (banyan batch -N alone asks for whole nodes, as flux batch does).
    if (ntasks == 0 && nodes != 0 && complete)
        ntasks = nodes;
    if (ntasks != 0)
        out.push_back(fmt::format("--ntasks={}", ntasks));
    if (has("cpus-per-task")) {
        auto c = count_of("cpus-per-task");
        if (!c)
            return c.error();
        out.push_back(fmt::format("--cores-per-task={}", *c));
    }
    if (has("time")) {
        auto seconds = slurm_minutes_time(value("time"));
        if (!seconds)
            return bad("time", seconds.error().message);
        if (*seconds > 0)
            out.push_back(fmt::format("--time-limit={}s", *seconds));
    }
    if (has("job-name"))
        out.push_back("--job-name=" + value("job-name"));
    for (const char* name : {"output", "error", "input"}) {
        if (!has(name))
            continue;
        auto file = slurm_filename(value(name));
        if (!file)
            return bad(name, file.error().message);
        out.push_back(fmt::format("--{}={}", name, *file));
    }
    if (has("chdir")) {
        std::error_code ec;
        out.push_back("--cwd=" + std::filesystem::absolute(value("chdir"), ec).lexically_normal().string());
    }
    bool exclusive = false;
    if (has("exclusive")) {
        if (!value("exclusive").empty())
            return bad("exclusive", fmt::format("--exclusive={} is {}; --exclusive alone (whole nodes) is",
                                                value("exclusive"), kSeeManual));
        exclusive = true;
    }
    if (has("mem")) {
        if (value("mem") == "0") {  // the whole memory of each node: the whole node
            exclusive = true;
        } else {
            auto size = slurm_memory(value("mem"));
            if (!size)
                return bad("mem", size.error().message);
            out.push_back("--mem=" + *size);
        }
    }
    if (has("mem-per-cpu")) {
        if (has("mem"))
            return bad("mem-per-cpu", "and --mem: give one of them");
        auto size = slurm_memory(value("mem-per-cpu"));
        if (!size)
            return bad("mem-per-cpu", size.error().message);
        out.push_back("--mem-per-cpu=" + *size);
    }
    if (exclusive)
        out.push_back("--exclusive");
    // GPUs: Banyan asks for them per task.
    int gpu_options = has("gres") + has("gpus-per-task") + has("gpus");
    if (gpu_options > 1)
        return bad(has("gres") ? "gres" : "gpus", "give one of --gres=gpu:N, --gpus-per-task and --gpus");
    if (has("gpus-per-task")) {
        auto g = count_of("gpus-per-task");
        if (!g)
            return g.error();
        out.push_back(fmt::format("--gpus-per-task={}", *g));
    }
    if (has("gres")) {
        std::string v = value("gres");
        auto parts = split(v, ':');
        if (v.find(',') != std::string::npos || parts.empty() || parts[0] != "gpu" || parts.size() > 2)
            return bad("gres", fmt::format("'{}': only gpu:COUNT is supported (typed GPUs and other GRES are not)", v));
        int64_t per_node = 1;
        if (parts.size() == 2) {
            if (!is_count(parts[1]) || std::stoll(parts[1]) == 0)
                return bad("gres", fmt::format("'{}': expected gpu:COUNT", v));
            per_node = std::stoll(parts[1]);
        }
        int64_t tasks_per_node = 1;
        if (ntasks != 0) {
            if (nodes == 0)
                return bad("gres", "is per node: with --ntasks it needs --nodes (or give --gpus-per-task)");
            if (ntasks % nodes != 0)
                return bad("gres", fmt::format("is per node: {} tasks do not split evenly over {} nodes", ntasks,
                                               nodes));
            tasks_per_node = ntasks / nodes;
        }
        if (per_node % tasks_per_node != 0)
            return bad("gres", fmt::format("{} GPUs per node do not split evenly over {} tasks per node (give "
                                           "--gpus-per-task)",
                                           per_node, tasks_per_node));
        out.push_back(fmt::format("--gpus-per-task={}", per_node / tasks_per_node));
    }
    if (has("gpus")) {
        auto g = count_of("gpus");
        if (!g)
            return g.error();
        int64_t tasks = ntasks != 0 ? ntasks : (nodes != 0 ? nodes : 1);
        if (*g % tasks != 0)
            return bad("gpus", fmt::format("{} GPUs do not split evenly over {} tasks (give --gpus-per-task)", *g,
                                           tasks));
        out.push_back(fmt::format("--gpus-per-task={}", *g / tasks));
    }
    if (has("partition")) {
        if (value("partition").find(',') != std::string::npos)
            return bad("partition", "a list of partitions is " + std::string(kSeeManual) + "; give one");
        if (has("qos"))
            return bad("qos", "and --partition: Banyan's tiers are its queues; give one of them");
        out.push_back("--queue=" + value("partition"));
    } else if (has("qos")) {
        out.push_back("--queue=" + value("qos"));
    }
    if (has("account"))
        out.push_back("--bank=" + value("account"));
    if (has("dependency")) {
        std::vector<std::string> terms;
        for (const auto& list : given_.at("dependency").values) {
            if (list.find('?') != std::string::npos)
                return bad("dependency", fmt::format("any-of lists (?) are {}", kSeeManual));
            for (const std::string& term : split_commas(list)) {
                auto t = slurm_dependency(term);
                if (!t)
                    return bad("dependency", t.error().message);
                terms.push_back(*t);
            }
        }
        for (const auto& t : terms)
            out.push_back("--dependency=" + t);
    }
    if (has("array")) {
        if (auto a = ArraySpec::parse(value("array")); !a)
            return bad("array", a.error().message);
        out.push_back("--array=" + value("array"));
    }
    if (has("begin")) {
        auto when = slurm_begin(value("begin"));
        if (!when)
            return bad("begin", when.error().message);
        out.push_back("--begin-time=" + *when);
    }
    if (has("signal")) {
        // [R][B]:SIG@TIME. B: the batch shell alone; without it, a batch
        // job's steps alone (its instance's jobs: instances.md §4).
        std::string v = value("signal");
        std::string flags;
        if (auto colon = v.find(':'); colon != std::string::npos) {
            flags = v.substr(0, colon);
            v = v.substr(colon + 1);
        }
        if (flags.find('R') != std::string::npos)
            return bad("signal", "R: (a reservation's end) is " + std::string(kSeeManual));
        if (flags.find_first_not_of("B") != std::string::npos)
            return bad("signal", fmt::format("'{}:': expected B: or nothing before the signal", flags));
        bool to_script = flags == "B";
        if (to_script && !instance_)
            return bad("signal", "B: is for a batch job (sbatch, #SBATCH)");
        if (instance_) {
            std::string sig = v.substr(0, v.find('@'));
            for (char& c : sig)
                c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
            std::set<std::string> passed = {"",         "USR1", "SIGUSR1", std::to_string(SIGUSR1),
                                            "USR2",     "SIGUSR2", std::to_string(SIGUSR2)};
            if (!passed.contains(sig))
                return bad("signal", fmt::format("'{}': a batch job passes on only USR1 and USR2", v.substr(0, v.find('@'))));
        }
        out.push_back("--signal=" + v);
        if (instance_)
            out.push_back(to_script ? "--signal-to=script" : "--signal-to=jobs");
    }
    if (has("requeue") && value("requeue") != "no")
        out.push_back("--requeue");
    if (has("export")) {
        // Slurm: ALL (the default) exports everything, and then the
        // submitter's value of a named variable wins over one given; a list
        // without ALL exports only what it names.
        bool all = false, none = false;
        std::vector<std::string> items;
        for (const auto& list : given_.at("export").values)
            for (const std::string& item : split_commas(list)) {
                if (item == "ALL")
                    all = true;
                else if (item == "NONE")
                    none = true;
                else
                    items.push_back(item);
            }
        if (none && (all || !items.empty()))
            return bad("export", "NONE exports nothing: give it alone");
        if (!all)
            out.push_back("--env-remove=*");
        for (const auto& item : items) {
            auto eq = item.find('=');
            std::string name = item.substr(0, eq);
            if (name.empty())
                return bad("export", fmt::format("'{}': expected NAME or NAME=VALUE", item));
            if (eq == std::string::npos) {
                if (!std::getenv(name.c_str()))
                    return bad("export", fmt::format("{} is not set in this environment", name));
                if (!all)
                    out.push_back("--env=" + name);
            } else if (!all || !std::getenv(name.c_str())) {
                out.push_back("--env=" + item);
            }
        }
    }
    std::vector<std::string> requires_;
    if (has("constraint")) {
        auto c = slurm_constraint(value("constraint"));
        if (!c)
            return bad("constraint", c.error().message);
        requires_.push_back(*c);
    }
    for (const char* name : {"nodelist", "exclude"}) {
        if (!has(name))
            continue;
        std::string hosts = value(name);
        if (hosts.find('/') != std::string::npos)
            return bad(name, "a file of host names is " + std::string(kSeeManual) + "; give a host list");
        std::string query = fmt::format("{}host:{}", std::string_view(name) == "exclude" ? "not " : "", hosts);
        if (auto c = Constraint::parse_query(query); !c)
            return bad(name, c.error().message);
        requires_.push_back(query);
    }
    for (const auto& r : requires_)
        out.push_back("--requires=" + r);
    if (has("mail-type")) {  // sent by the job manager (jobs.md §10)
        if (auto types = slurm_mail_types(value("mail-type")); !types) {
            const std::string& why = types.error().message;  // "TYPE: expected ..."
            return bad("mail-type", fmt::format("'{}': {}; NONE, BEGIN, END, FAIL, REQUEUE, INVALID_DEPEND, "
                                                "ARRAY_TASKS and ALL are",
                                                why.substr(0, why.find(':')), kSeeManual));
        }
        out.push_back("--setattr=system.mail.type=" + value("mail-type"));
    }
    if (has("mail-user"))
        out.push_back("--setattr=system.mail.user=" + value("mail-user"));
    if (has("comment"))
        out.push_back("--setattr=user.comment=" + value("comment"));
    for (const char* name : {"container", "container-image", "container-mounts"}) {
        if (has(name) && instance_)
            return bad(name, "the batch script runs on the host, in its own instance: give it to srun in the "
                             "script (each step then runs in the container)");
    }
    if (has("container") && has("container-image"))
        return bad("container-image", "--container names the image already: give one of the two");
    if (has("container") || has("container-image"))
        out.push_back("--container=" + value(has("container") ? "container" : "container-image"));
    if (has("container-mounts")) {
        // Pyxis: SRC[:DST[:ro]] pairs, comma-separated.
        for (std::string mount : split_commas(value("container-mounts"))) {
            if (mount.empty())
                return bad("container-mounts", "an empty mount in the list");
            if (mount.find(':') == std::string::npos)
                mount += ":" + mount;  // the same path inside
            out.push_back("--container-mount=" + mount);
        }
    }
    if (has("hold"))
        out.push_back("--urgency=0");
    if (has("label"))
        out.push_back("--label-io");
    if (has("cpu-bind")) {
        std::string v = value("cpu-bind");
        if (v == "none" || v == "no")
            out.push_back("--setopt=cpu-affinity=off");
        else if (v != "q" && v != "quiet" && v != "v" && v != "verbose" && v != "cores")
            return bad("cpu-bind", fmt::format("'{}': none, cores, quiet and verbose are; other bindings are {}", v,
                                               kSeeManual));
    }
    if (has("mpi")) {
        std::string v = value("mpi");
        if (v != "pmix" && !v.starts_with("pmix_") && v != "pmi2" && v != "none")
            return bad("mpi", fmt::format("'{}': Banyan offers PMIx and PMI-1 to every job (pmix, pmi2, none)", v));
    }
    return out;
}

Result<std::string> slurm_filename(const std::string& pattern) {
    if (pattern.find('\\') != std::string::npos) {  // no replacements at all
        std::string out;
        for (char c : pattern)
            if (c != '\\')
                out += c;
        return out;
    }
    std::string out;
    for (size_t i = 0; i < pattern.size(); i++) {
        if (pattern[i] != '%') {
            out += pattern[i];
            continue;
        }
        if (i + 1 == pattern.size())
            return make_error(EINVAL, fmt::format("'{}': a % at the end (%% is a %)", pattern));
        char c = pattern[++i];
        switch (c) {
            case '%':
                out += '%';
                break;
            case 'j':
                out += "{{id.dec}}";
                break;
            case 'x':
                out += "{{name}}";
                break;
            case 'u':
                out += "{{user}}";
                break;
            case 'A':
                out += "{{array_id.dec}}";
                break;
            case 'a':
                out += "{{array_index}}";
                break;
            case 'N':
                out += "{{node}}";
                break;
            case 't':
                out += "{{taskid}}";
                break;
            default:
                return make_error(EINVAL, fmt::format("'{}': %{} is {}; %j %x %u %A %a %N %t %% are", pattern, c,
                                                      kSeeManual));
        }
    }
    return out;
}

Result<uint64_t> slurm_minutes_time(const std::string& text) {
    if (text == "UNLIMITED" || text == "INFINITE" || text == "unlimited" || text == "infinite")
        return uint64_t{0};
    auto error = [&] {
        return make_error(EINVAL, fmt::format("'{}': expected MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS",
                                              text));
    };
    uint64_t days = 0;
    std::string rest = text;
    bool with_days = false;
    if (auto dash = text.find('-'); dash != std::string::npos) {
        if (!is_count(text.substr(0, dash)))
            return error();
        days = std::stoull(text.substr(0, dash));
        rest = text.substr(dash + 1);
        with_days = true;
    }
    auto parts = split(rest, ':');
    if (parts.empty() || parts.size() > 3)
        return error();
    std::vector<uint64_t> n;
    for (const auto& p : parts) {
        if (!is_count(p))
            return error();
        n.push_back(std::stoull(p));
    }
    uint64_t seconds = 0;
    if (with_days)  // D-HH, D-HH:MM, D-HH:MM:SS
        seconds = n[0] * 3600 + (n.size() > 1 ? n[1] * 60 : 0) + (n.size() > 2 ? n[2] : 0);
    else if (n.size() == 1)  // MM
        seconds = n[0] * 60;
    else if (n.size() == 2)  // MM:SS
        seconds = n[0] * 60 + n[1];
    else  // HH:MM:SS
        seconds = n[0] * 3600 + n[1] * 60 + n[2];
    // sbatch(1): "A time limit of zero requests that no time limit be imposed."
    return seconds + days * 86400;
}

}  // namespace banyan::cli
