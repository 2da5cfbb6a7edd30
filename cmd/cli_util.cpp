#include "cmd/cli_util.hpp"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "core/duration.hpp"
#include "core/json_field.hpp"
#include "core/text.hpp"

namespace banyan::cli {

void fail(std::string message, int exit_code) {
    throw Failure{std::move(message), exit_code};
}

namespace {
std::optional<std::vector<std::string>> g_after_dashes;
}  // namespace

void set_command_after_dashes(std::vector<std::string> words) {
    g_after_dashes = std::move(words);
}

std::vector<std::string> command_of(const CLI::App* cmd) {
    std::vector<std::string> words = cmd->remaining();
    if (g_after_dashes && words.empty())
        return *g_after_dashes;
    // prefix_command() makes the first word CLI11 does not know the start
    // of COMMAND: a misspelt option of ours would run as the command.
    if (!words.empty() && words[0].size() > 1 && words[0][0] == '-')
        fail(fmt::format("{}: unknown option (COMMAND starts at the first word that is not an option, or after --)",
                         words[0]));
    if (g_after_dashes) {  // the "--" was COMMAND's own (prog -- --its-flag)
        words.push_back("--");
        words.insert(words.end(), g_after_dashes->begin(), g_after_dashes->end());
    }
    return words;
}

std::vector<std::string> command_or_shell(std::vector<std::string> command) {
    if (!command.empty())
        return command;
    const char* shell = std::getenv("SHELL");
    return {shell && *shell ? shell : "/bin/sh"};
}

Client connect_to_instance() {
    return must(Client::connect());
}

std::string nested_instance_uri(const std::string& path) {
    std::string uri;  // empty: $BANYAN_URI
    for (const auto& part : split_commas(replace_all(path, "/", ","))) {
        JobId id = job_id_argument(part);
        Client client = must(Client::connect(uri));
        auto info = client.rpc("job-manager.info", {{"id", id}});
        if (!info)
            fail(fmt::format("--job {}: {}", part, info.error().message));
        const auto& job = json_object_at(*info, {"job"});
        auto state = json_field<std::string>(job, "state", "", "job");
        auto instance = json_field<std::string>(job, "instance", "", "job");
        if (!state || !instance)
            fail(fmt::format("--job {}: unexpected reply from the instance", part));
        if (instance->empty())
            fail(fmt::format("--job {}: job {} is not an instance (run by banyan batch or banyan alloc)", part,
                             format_jobid(id)));
        if (*state != "run")
            fail(fmt::format("--job {}: job {} is {}: its instance has ended", part, format_jobid(id), *state));
        // Through this instance's job manager to the job's own, from any
        // node (doc/spec/instances.md §5).
        std::string base = client.uri();
        uri = base + (base.find('#') == std::string::npos ? "#" : "/") + format_jobid(id);
        // Told by the instance as it starts: its socket follows at once.
        for (int tries = 0; tries < 200; tries++) {
            auto nested = Client::connect(uri);
            if (nested && nested->rpc("broker.ping", nlohmann::json::object(), kNodeIdAny, std::chrono::seconds(10)))
                break;
            usleep(50'000);
        }
    }
    return uri;
}

void add_proxy(CLI::App& app, int& exit_code) {
    static std::string path;
    auto* cmd = app.add_subcommand("proxy", "Run COMMAND (default: a shell) against job ID's nested instance");
    cmd->add_option("ID", path, "the job (ID1/ID2 through nested instances)")->required();
    cmd->prefix_command();
    cmd->footer("COMMAND...: run with BANYAN_URI set to the job's instance (default: $SHELL)");
    cmd->callback([cmd, &exit_code] {
        std::vector<std::string> command = command_of(cmd);
        command = command_or_shell(std::move(command));
        std::string uri = nested_instance_uri(path);
        setenv("BANYAN_URI", uri.c_str(), 1);
        std::vector<char*> argv;
        for (auto& word : command)
            argv.push_back(word.data());
        argv.push_back(nullptr);
        execvp(argv[0], argv.data());
        exit_code = errno == ENOENT ? 127 : 126;
        fail(fmt::format("{}: {}", command.front(), std::strerror(errno)), exit_code);
    });
}

JobList::JobList(nlohmann::json reply) : rows_(std::move(reply["jobs"])) {
    const auto& columns = reply["columns"];
    for (size_t i = 0; i < columns.size(); i++)
        columns_[columns[i].get<std::string>()] = i;
}

const nlohmann::json& JobList::get(size_t i, std::string_view name) const {
    static const nlohmann::json null;
    auto c = columns_.find(name);
    const auto& row = rows_[i];
    return c == columns_.end() || c->second >= row.size() ? null : row[c->second];
}

nlohmann::json JobList::object(size_t i) const {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [name, index] : columns_)
        if (index < rows_[i].size() && !rows_[i][index].is_null())
            out[name] = rows_[i][index];
    return out;
}

void JobList::keep_only(const std::vector<size_t>& indexes) {
    nlohmann::json kept = nlohmann::json::array();
    for (size_t i : indexes)
        kept.push_back(std::move(rows_[i]));
    rows_ = std::move(kept);
}

JobList list_jobs(Client& client, const nlohmann::json& request) {
    return JobList(must(client.rpc("job-manager.list", request, 0)));
}

JobId job_id_argument(const std::string& text) {
    return must(parse_jobid(text));
}

nlohmann::json job_request(const std::string& text, nlohmann::json fields) {
    JobRef ref = must(parse_job_ref(text));
    fields["id"] = ref.id;
    if (ref.index)
        fields["index"] = *ref.index;
    return fields;
}

JobId job_id_argument(Client& client, const std::string& text) {
    JobRef ref = must(parse_job_ref(text));
    if (!ref.index)
        return ref.id;
    auto info = must(client.rpc("job-manager.info", job_request(text), 0));
    return must(json_field<JobId>(json_object_at(info, {"job"}), "id", 0, "job-manager.info"));
}

std::string user_name(uint32_t uid) {
    static std::map<uint32_t, std::string> names;
    auto it = names.find(uid);
    if (it != names.end())
        return it->second;
    passwd* pw = getpwuid(uid);
    return names[uid] = pw ? pw->pw_name : std::to_string(uid);
}

int signal_number(const std::string& text, std::string_view option) {
    auto n = parse_signal(text);
    if (!n)
        fail(fmt::format("{} {}", option, n.error().message));
    return *n;
}

double moment_option(const std::string& text, std::string_view option, double now) {
    // A leading '-' reads as "ago": -1d is a day before now.
    std::string when = text.starts_with('-') ? "+" + text.substr(1) : text;
    auto t = parse_moment(when, now);
    if (!t)
        fail(fmt::format("{} {}: {}", option, text, t.error().message));
    return text.starts_with('-') ? now - (*t - now) : *t;
}

uint32_t uid_of_user(const std::string& user, std::string_view option) {
    if (!user.empty() && user.find_first_not_of("0123456789") == std::string::npos) {
        auto n = std::stoull(user.size() > 10 ? std::string("99999999999") : user);
        if (n > 0xfffffffe)
            fail(fmt::format("{} {}: not a user id", option, user));
        return static_cast<uint32_t>(n);
    }
    const passwd* pw = getpwnam(user.c_str());
    if (!pw)
        fail(fmt::format("{} {}: no such user", option, user));
    return pw->pw_uid;
}

}  // namespace banyan::cli
