// banyan submit / banyan run: make a jobspec from options and COMMAND and
// submit it (doc/spec/jobs.md §7). submit prints the id; run streams the
// job's output and exits with its exit code. banyan batch / banyan alloc:
// the same for a nested instance (doc/spec/instances.md §6).
#include <sys/ioctl.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "cmd/cli_util.hpp"
#include "cmd/job_signature.hpp"
#include "cmd/progress.hpp"
#include "cmd/slurm_options.hpp"
#include "cmd/submit_options.hpp"
#include "core/idset.hpp"
#include "core/json_field.hpp"
#include "core/programs.hpp"
#include "core/text.hpp"
#include "core/text_file.hpp"

namespace banyan::cli {
namespace {

constexpr size_t kSubmitWindow = 512;     // submissions in flight at once
constexpr uint64_t kMaxCopies = 100'000;  // --cc: one submit's jobs

// A request larger than a message may be fails as a broken connection:
// say which limit it is instead.
void check_size(const nlohmann::json& jobspec) {
    // The replace handler, as the message codec: invalid UTF-8 is not an error here.
    auto dump = [](const nlohmann::json& j) {
        return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    };
    size_t size = dump(jobspec).size();
    if (size + 4096 <= kDefaultMaxPayload)
        return;
    size_t env = json_object_at(jobspec, {"attributes", "system"}).contains("environment")
                     ? dump(jobspec["attributes"]["system"]["environment"]).size()
                     : 0;
    fail(
        fmt::format("the job is {:.1f} MiB, its environment {:.1f} MiB; a job may be at most {} MiB "
                    "(leave variables out with --env-remove or --env=-PATTERN)",
                    size / 1048576.0, env / 1048576.0, kDefaultMaxPayload >> 20));
}

// Submits every jobspec, `kSubmitWindow` in flight; returns the ids in
// order. With `print`, each id is printed as soon as it and all before it
// are acknowledged, so what was printed is exactly what was accepted, even
// if a later submission fails.
std::vector<JobId> submit_all(Client& client, const std::vector<nlohmann::json>& jobspecs, int64_t urgency, bool print,
                              bool progress) {
    std::vector<JobId> ids(jobspecs.size());
    // With ids printed to a terminal the bar would mix into them: it shows
    // when they go to a file or pipe, or with --quiet.
    ProgressBar bar("submit", jobspecs.size(),
                    progress || ((!print || !isatty(STDOUT_FILENO)) && isatty(STDERR_FILENO)));
    // One credential per job: banyan-imp starts each credential's shells once.
    bool sign = instance_of_another_user(client);
    std::map<uint32_t, size_t> in_flight;  // matchtag -> index
    size_t next = 0, done = 0, printed = 0;
    bool warned = false;
    while (done < jobspecs.size()) {
        while (next < jobspecs.size() && in_flight.size() < kSubmitWindow) {
            nlohmann::json body{{"jobspec", jobspecs[next]}, {"urgency", urgency}};
            if (sign)
                body["J"] = must(sign_jobspec(jobspecs[next].dump()));
            auto tag = must(client.send(Message::request("job-manager.submit", body, 0)));
            in_flight[tag] = next++;
        }
        Message resp = must(client.recv());
        auto it = in_flight.find(resp.matchtag);
        if (it == in_flight.end())
            continue;
        auto body = response_payload(resp);
        if (!body)
            fail(body.error().message);  // jobs answered before this one stay submitted
        auto id = json_field<JobId>(*body, "id", 0, "job-manager.submit");
        if (!id || *id == 0)
            fail("job-manager.submit: the answer has no job id");
        ids[it->second] = *id;
        // Said once per command, not once per job (--cc).
        if (auto warning = json_field<std::string>(*body, "warning", "", "job-manager.submit");
            warning && !warning->empty() && !warned) {
            fmt::print(stderr, "warning: {}\n", *warning);
            warned = true;
        }
        in_flight.erase(it);
        done++;
        bar.advance();
        if (print) {
            std::string out;
            for (; printed < ids.size() && ids[printed] != 0; printed++)
                out += format_jobid(ids[printed]) + "\n";
            fmt::print("{}", out);
            std::fflush(stdout);
        }
    }
    return ids;
}

// --cc IDSET: a copy of `jobspec` for each index, {cc} in its command's
// words made the index; without --cc, the jobspec alone.
std::vector<nlohmann::json> copies_of(const nlohmann::json& jobspec, const std::string& cc) {
    if (cc.empty())
        return {jobspec};
    if (json_object_at(jobspec, {"attributes", "system"}).contains("array"))
        fail("--array and --cc: give one (--array makes one job of many; --cc, a job per index)");
    auto set = IdSet::parse(cc);
    if (!set)
        fail("--cc " + set.error().message);
    if (set->count() > kMaxCopies)
        fail(fmt::format("--cc {}: {} jobs; one submit makes at most {}", cc, set->count(), kMaxCopies));
    std::vector<nlohmann::json> jobspecs;
    set->for_each([&](uint64_t index) {
        nlohmann::json copy = jobspec;
        for (auto& arg : copy["tasks"][0]["command"])
            arg = replace_all(arg.get<std::string>(), "{cc}", std::to_string(index));
        jobspecs.push_back(std::move(copy));
    });
    return jobspecs;
}

// The words of a directive, as sh splits them: quotes ('...', "...") and
// backslashes; nullopt when a quote is not closed. With `comments`, an
// unquoted # ends the line, as sbatch reads #SBATCH lines.
std::optional<std::vector<std::string>> shell_words(std::string_view text, bool comments = false) {
    std::vector<std::string> words;
    std::string word;
    bool in_word = false;
    for (size_t i = 0; i < text.size(); i++) {
        char c = text[i];
        if (c == ' ' || c == '\t') {
            if (in_word)
                words.push_back(std::move(word));
            word.clear();
            in_word = false;
            continue;
        }
        if (c == '#' && comments)
            break;
        in_word = true;
        if (c == '\\' && i + 1 < text.size()) {
            word += text[++i];
        } else if (c == '\'' || c == '"') {
            size_t close = text.find(c, i + 1);
            if (close == std::string_view::npos)
                return std::nullopt;
            word += text.substr(i + 1, close - i - 1);
            i = close;
        } else {
            word += c;
        }
    }
    if (in_word)
        words.push_back(std::move(word));
    return words;
}

// Flux's `flux batch` options that are Banyan's own (doc/spec/slurm.md §2):
// what a #FLUX: line may give.
bool is_flux_option(const std::string& word) {
    static const std::set<std::string> names = {
        "-N",           "--nodes",  "-n",          "--ntasks", "-c",          "--cores-per-task", "-g",
        "--gpus-per-task", "-t",    "--time-limit", "--job-name", "--output", "--error",  "-q",
        "--queue",      "--dependency", "-S",      "--setattr", "-o",         "--setopt", "--urgency",
        "--begin-time", "--env",    "--env-remove", "--env-file", "--requires", "--signal", "-x",
        "--exclusive",  "--cwd",    "--input"};
    std::string name = word.substr(0, word.find('='));
    if (name.size() > 2 && name[1] != '-')  // -N4
        name = name.substr(0, 2);
    return names.count(name) > 0;
}

// The options one kind of directive gave (#BANYAN, or #SBATCH and #FLUX:
// together), parsed as `banyan batch` parses its own.
struct DirectiveLayer {
    SubmitOptions options;
    CLI::App app{"directives", "directives"};
    DirectiveLayer() {
        add_submit_options(&app, options);
        add_array_option(&app, options.array);
        add_signal_to_option(&app, options.signal_to);
        // Among lines of one kind, the last of an option wins (CLI11
        // refuses a repeated single-value option by default).
        for (CLI::Option* option : app.get_options())
            if (option->get_items_expected_max() == 1)
                option->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    }
    // Fails naming `where` (SCRIPT:LINE and the line) and the option.
    void check(const std::vector<std::string>& words, const std::string& where) {
        SubmitOptions scratch;
        CLI::App one("directive", "directive");
        add_submit_options(&one, scratch);
        add_array_option(&one, scratch.array);
        add_signal_to_option(&one, scratch.signal_to);
        parse(one, words, where);
    }
    void parse_all(const std::vector<std::string>& words, const std::string& where) { parse(app, words, where); }

  private:
    static void parse(CLI::App& into, const std::vector<std::string>& words, const std::string& where) {
        try {
            std::vector<std::string> reversed(words.rbegin(), words.rend());
            into.parse(reversed);
        } catch (const CLI::ParseError& e) {
            fail(fmt::format("{}: {}", where, e.what()));
        }
    }
};

// Applies `layer`'s options to `cmd`'s where nothing above it gave them
// (`cmd`'s own count: the command line, then layers applied before).
// The environment rules are one list: a layer's count only when nothing
// above gave any.
const std::vector<std::string> kEnvOptions = {"--env", "--env-remove", "--env-file"};

bool gives_env_rules(CLI::App* app) {
    for (const auto& name : kEnvOptions)
        if (app->get_option(name)->count() > 0)
            return true;
    return false;
}

void apply_layer(CLI::App* cmd, SubmitOptions& o, DirectiveLayer& layer, bool& env_set) {
    const auto& env_options = kEnvOptions;
    if (!env_set && gives_env_rules(&layer.app)) {
        o.env = layer.options.env;
        env_set = true;
    }
    for (CLI::Option* given : layer.app.get_options()) {
        if (given->count() == 0 ||
            std::find(env_options.begin(), env_options.end(), given->get_name()) != env_options.end())
            continue;
        CLI::Option* target = cmd->get_option_no_throw(given->get_name());
        if (!target || target->count() > 0)
            continue;  // given above: it wins
        target->add_result(given->results());
        target->run_callback();
    }
}

// The directives of `script`'s comment header (after #!, up to the first
// line that is neither a comment nor blank), applied to `cmd`'s options
// that the command line did not give: the command line wins over #BANYAN
// lines, which win over #SBATCH and #FLUX: lines (doc/spec/slurm.md §1).
// Fails naming SCRIPT:LINE and what is wrong. Returns whether the script
// has #SBATCH lines (its tasks then get Slurm's variables).
bool apply_directives(CLI::App* cmd, SubmitOptions& o, const std::string& path, const std::string& script,
                      const SlurmOptions* slurm_command_line) {
    DirectiveLayer banyan_layer, foreign_layer;
    std::vector<std::string> banyan_words, foreign_words;
    SlurmOptions slurm;
    bool any_slurm = false;
    size_t line_no = 1;
    for (size_t start = script.find('\n'); start != std::string::npos && start + 1 < script.size();) {
        line_no++;
        size_t end = script.find('\n', start + 1);
        std::string_view line(script.data() + start + 1, (end == std::string::npos ? script.size() : end) - start - 1);
        start = end;
        size_t first = line.find_first_not_of(" \t");
        if (first == std::string_view::npos)
            continue;
        if (line[first] != '#')
            break;
        line.remove_prefix(first);
        std::string_view kind;
        for (std::string_view k : {"#BANYAN", "#SBATCH", "#FLUX:", "# flux:", "#flux:"})
            if (line.starts_with(k))
                kind = k;
        if (kind.empty())
            continue;
        std::string_view rest = line.substr(kind.size());
        if (!rest.empty() && rest[0] != ' ' && rest[0] != '\t')
            continue;  // #BANYANISH: another comment
        if (kind == "#SBATCH" && first != 0)
            continue;  // sbatch reads its lines at the start of a line only
        std::string where = fmt::format("{}:{}: {}", path, line_no, kind);
        auto words = shell_words(rest, kind == "#SBATCH");
        if (!words)
            fail(fmt::format("{}{}: a quote is not closed", where, rest));
        if (kind == "#BANYAN") {
            banyan_layer.check(*words, where + std::string(rest));  // each line alone first, so an error names its line
            banyan_words.insert(banyan_words.end(), words->begin(), words->end());
        } else if (kind == "#SBATCH") {
            any_slurm = true;
            auto used = slurm.parse(*words, SlurmCommand::directive, where);
            if (!used)
                fail(used.error().message);
            if (*used < words->size())
                fail(fmt::format("{} {}: not an option (a directive holds options only)", where, (*words)[*used]));
        } else {
            for (const auto& w : *words)
                if (w.starts_with("-") && !is_flux_option(w))
                    fail(fmt::format("{} {}: not supported (banyan-slurm(7) lists what is)", where, w));
            foreign_layer.check(*words, where + std::string(rest));
            foreign_words.insert(foreign_words.end(), words->begin(), words->end());
        }
    }
    if (slurm_command_line) {  // sbatch's options over the script's, translated as one
        slurm.overlay(*slurm_command_line);
        any_slurm = true;
    }
    auto translated = slurm.banyan_words();
    if (!translated)
        fail(translated.error().message);
    foreign_words.insert(foreign_words.begin(), translated->begin(), translated->end());
    banyan_layer.parse_all(banyan_words, path + ": #BANYAN directives");
    foreign_layer.parse_all(foreign_words, path + ": #SBATCH and #FLUX: directives");
    bool env_set = gives_env_rules(cmd);
    apply_layer(cmd, o, banyan_layer, env_set);
    apply_layer(cmd, o, foreign_layer, env_set);
    return any_slurm;
}

// A nested instance's jobspec: one broker per node of the allocation.
// -N alone asks for whole nodes, as `flux batch -N` does.
nlohmann::json instance_jobspec(SubmitOptions& o, std::vector<std::string> broker_args) {
    // Its brokers are the host's programs: the jobs inside may run in
    // containers, not the instance.
    if (!o.container.empty() || !o.container_mounts.empty())
        fail("--container: the instance of a batch job or allocation runs on the host; give --container to the "
             "banyan run (or srun) lines inside it");
    if (o.nodes && !o.ntasks)
        o.exclusive = true;
    std::vector<std::string> command = {program_path("banyan-broker"), "--nested", "--log-level=warning"};
    if (!o.signal_to.empty())
        command.push_back("--signal-to=" + o.signal_to);
    command.insert(command.end(), broker_args.begin(), broker_args.end());
    nlohmann::json jobspec = build_jobspec(o, command);
    // Its brokers pass SIGUSR1 and SIGUSR2 on; any other signal ends them.
    const auto& warning = json_object_at(jobspec, {"attributes", "system", "shell", "options", "signal"});
    int64_t signum = json_field<int64_t>(warning, "signum", 0, "--signal").value_or(0);
    if (signum != 0 && signum != SIGUSR1 && signum != SIGUSR2)
        fail(fmt::format("--signal={}: an instance (batch, alloc) passes on only USR1 and USR2", o.signal));
    jobspec["tasks"][0]["count"] = {{"per_resource", {{"type", "node"}, {"count", 1}}}};
    return jobspec;
}

// --pty: task 0 on a pseudo-terminal of its own (doc/spec/shell.md §5).
void add_pty_option(CLI::App* cmd, bool& pty) {
    cmd->add_flag("--pty", pty,
                  "run task 0 on a terminal of its own, connected to this one (an interactive shell, an editor)");
}

// The job's terminal starts with this one's size (80x24 without one).
void request_pty(nlohmann::json& jobspec) {
    winsize size{};
    bool sized = ioctl(0, TIOCGWINSZ, &size) == 0 && size.ws_row > 0 && size.ws_col > 0;
    jobspec["attributes"]["system"]["shell"]["options"]["pty"] =
        sized ? nlohmann::json{{"rows", size.ws_row}, {"cols", size.ws_col}} : nlohmann::json(true);
}

}  // namespace

nlohmann::json slurm_shell_option(int64_t ntasks) {
    std::error_code ec;
    nlohmann::json option{{"submit_dir", std::filesystem::current_path(ec).string()}};
    if (ntasks > 0)
        option["ntasks"] = ntasks;
    return option;
}

nlohmann::json allocation_jobspec(SubmitOptions& o, std::vector<std::string> command) {
    command = command_or_shell(std::move(command));
    if (o.job_name.empty())
        o.job_name = std::filesystem::path(command.front()).filename().string();
    std::vector<std::string> args = {"--"};
    args.insert(args.end(), command.begin(), command.end());
    return instance_jobspec(o, args);
}

int run_attached(nlohmann::json jobspec, const SubmitOptions& o, bool pty) {
    // Task 0 reads this command's stdin, unless it reads a file (--input).
    bool with_stdin = o.input.empty();
    if (with_stdin)
        jobspec["attributes"]["system"]["shell"]["options"]["stdin"] = "forward";
    if (pty)
        request_pty(jobspec);
    check_size(jobspec);
    Client client = connect_to_instance();
    JobId id = submit_all(client, {jobspec}, o.urgency, false, false).front();
    return attach_job(client, id, true, with_stdin, pty);
}

void add_array_option(CLI::App* cmd, std::string& array) {
    cmd->add_option("--array", array,
                    "a job array: one job per index of SPEC (1-100, 1,3,5-9:2), at most T at once with %T; "
                    "{{array_index}} in the command and file names is the index");
}

void add_signal_to_option(CLI::App* cmd, std::string& signal_to) {
    cmd->add_option("--signal-to", signal_to,
                    "where the instance passes SIGUSR1 and SIGUSR2 on (--signal, banyan job kill): script, jobs or "
                    "all (the default)")
        ->check(CLI::IsMember({"script", "jobs", "all"}));
}

BatchScript read_batch_script(const std::string& path) {
    auto text = read_text_file(path);
    if (!text)
        fail(text.error().message);
    if (!text->starts_with("#!"))
        fail(fmt::format("{}:1: the first line must be #! and an interpreter (as #!/bin/sh)", path));
    // As sbatch does: its interpreter would be "/bin/sh\r".
    if (text->find("\r\n") != std::string::npos)
        fail(fmt::format("{}: has DOS line breaks (\\r\\n); convert it first (dos2unix {})", path, path));
    return {.path = path, .text = std::move(*text), .args = {}};
}

std::vector<JobId> submit_batch(CLI::App* cmd, SubmitOptions& o, const BatchScript& script, const std::string& cc,
                                BatchDefaults defaults, bool print, const SlurmOptions* slurm_command_line) {
    bool slurm =
        apply_directives(cmd, o, script.path, script.text, slurm_command_line) || defaults == BatchDefaults::slurm;
    if (o.job_name.empty())
        o.job_name = std::filesystem::path(script.path).filename().string();
    if (o.output.empty())
        o.output = defaults == BatchDefaults::banyan ? "banyan-{{id}}.out"
                   : o.array.empty()                 ? "slurm-{{id.dec}}.out"
                                                     : "slurm-{{array_id.dec}}_{{array_index}}.out";
    std::vector<std::string> args = {"--batch", "--"};
    args.insert(args.end(), script.args.begin(), script.args.end());
    int64_t ntasks = o.ntasks.value_or(o.nodes.value_or(1));
    nlohmann::json jobspec = instance_jobspec(o, args);
    jobspec["attributes"]["system"]["batch"] = {{"script", script.text}};
    // Slurm's variables for the script, with the task count it asked for
    // (the job's own tasks are its instance's brokers).
    if (slurm)
        jobspec["attributes"]["system"]["shell"]["options"]["slurm"] = slurm_shell_option(ntasks);
    check_size(jobspec);
    Client client = connect_to_instance();
    return submit_all(client, copies_of(jobspec, cc), o.urgency, print, false);
}

void add_batch(CLI::App& app, int& exit_code) {
    static SubmitOptions o;
    static std::string cc;
    auto* cmd =
        app.add_subcommand("batch", "Submit a batch script, run by a nested instance on its nodes; print the id");
    add_submit_options(cmd, o);
    cmd->add_option("--cc", cc, "submit a copy for each index in IDSET (e.g. 1-100); {cc} in ARGS is the index");
    add_array_option(cmd, o.array);
    add_signal_to_option(cmd, o.signal_to);
    cmd->prefix_command();
    cmd->footer(
        "SCRIPT [ARGS...]: the script (starting with #!, with #BANYAN OPTIONS lines in its header) and its "
        "arguments");
    cmd->callback([cmd, &exit_code] {
        std::vector<std::string> words = command_of(cmd);
        if (words.empty())
            fail("no SCRIPT given");
        BatchScript script = read_batch_script(words.front());
        script.args.assign(words.begin() + 1, words.end());
        submit_batch(cmd, o, script, cc, BatchDefaults::banyan, true);
        exit_code = 0;
    });
}

void add_alloc(CLI::App& app, int& exit_code) {
    static SubmitOptions o;
    static bool pty = false;
    auto* cmd = app.add_subcommand("alloc", "Run COMMAND (default: a shell) in a nested instance of its own");
    add_submit_options(cmd, o);
    add_signal_to_option(cmd, o.signal_to);
    add_pty_option(cmd, pty);
    cmd->prefix_command();
    cmd->footer("COMMAND...: what rank 0 of the instance runs, with BANYAN_URI set to it (default: $SHELL)");
    cmd->callback([cmd, &exit_code] { exit_code = run_attached(allocation_jobspec(o, command_of(cmd)), o, pty); });
}

void add_submit(CLI::App& app, int& exit_code) {
    static SubmitOptions o;
    static std::string cc;
    static bool quiet = false, wait = false, watch = false, progress = false;
    auto* cmd = app.add_subcommand("submit", "Submit a job; print its id");
    add_submit_options(cmd, o);
    cmd->add_option("--cc", cc, "submit a copy for each index in IDSET (e.g. 1-100); {cc} in COMMAND is the index");
    add_array_option(cmd, o.array);
    cmd->add_flag("--quiet", quiet, "do not print the job ids");
    cmd->add_flag("--progress", progress, "a progress bar on stderr even when it is not a terminal (--cc)");
    cmd->add_flag("--wait", wait, "wait for the jobs to end; exit with the highest exit code");
    cmd->add_flag("--watch", watch, "stream the jobs' output until they end (implies --wait)");
    // Everything from the first argument that is not an option on is
    // COMMAND, whose own options (sh -c ...) are not ours.
    cmd->prefix_command();
    cmd->footer("COMMAND...: the command to run and its arguments");
    cmd->callback([cmd, &exit_code] {
        std::vector<std::string> command = command_of(cmd);
        nlohmann::json jobspec = build_jobspec(o, command);
        check_size(jobspec);
        std::vector<nlohmann::json> jobspecs = copies_of(jobspec, cc);
        Client client = connect_to_instance();
        std::vector<JobId> ids = submit_all(client, jobspecs, o.urgency, !quiet, progress);
        exit_code = 0;
        for (JobId id : ids) {
            int code = watch  ? attach_job(client, id, false, false, false)
                       : wait ? wait_job(client, id, "banyan submit")
                              : 0;
            exit_code = std::max(exit_code, code);
        }
    });
}

void add_run(CLI::App& app, int& exit_code) {
    static SubmitOptions o;
    static bool pty = false;
    auto* cmd = app.add_subcommand("run", "Run a job: submit it, stream its output, exit with its exit code");
    add_submit_options(cmd, o);
    add_pty_option(cmd, pty);
    cmd->prefix_command();
    cmd->footer("COMMAND...: the command to run and its arguments");
    cmd->callback([cmd, &exit_code] { exit_code = run_attached(build_jobspec(o, command_of(cmd)), o, pty); });
}

}  // namespace banyan::cli
