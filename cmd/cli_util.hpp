// Helpers shared by the subcommands of `banyan`: one-line errors and the
// connection to the local broker.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/client.hpp"
#include "core/jobid.hpp"
#include "core/json_field.hpp"
#include "core/result.hpp"
#include "core/text.hpp"

namespace banyan::cli {

// Thrown by a subcommand to end with "banyan CMD: MESSAGE" and `exit_code`.
struct Failure {
    std::string message;
    int exit_code = 1;
};

[[noreturn]] void fail(std::string message, int exit_code = 1);
// The value of `r`, or fail() with its error.
template <class T>
T must(Result<T> r) {
    if (!r)
        fail(r.error().message);
    return std::move(r).value();
}
inline void must(Result<void> r) {
    if (!r)
        fail(r.error().message);
}
// A field of the instance's answer, read typed (json_field): a field of
// another type fails in one line naming it, never throws.
template <class T>
T answer_field(const nlohmann::json& answer, std::string_view key, T fallback) {
    return must(json_field<T>(answer, key, std::move(fallback), "answer"));
}

// Connects to the instance named by $BANYAN_URI, or fails with a clear line.
Client connect_to_instance();

// The URI of the nested instance job `path` runs ("ID", or "ID1/ID2" through
// nested instances), asked of $BANYAN_URI's instance with the caller's
// rights (doc/spec/instances.md §5). Waits up to 10 s for its socket to
// appear (a batch job that has just started). Fails with one line.
std::string nested_instance_uri(const std::string& path);

// COMMAND: what follows the options, or what followed "--" (CLI11 refuses
// words after "--" in a prefix_command, so main() takes them out first and
// hands them here). Fails naming an unknown option where COMMAND should start.
std::vector<std::string> command_of(const CLI::App* cmd);
void set_command_after_dashes(std::vector<std::string> words);
// `command`, or the user's shell ($SHELL, else /bin/sh) when it is empty.
std::vector<std::string> command_or_shell(std::vector<std::string> command);

// A job id from the command line, or fail() naming it.
JobId job_id_argument(const std::string& text);
// The job a request is about, from the command line: {"id": N}, or for
// an element of a job array, ID[INDEX], {"id": ID, "index": INDEX} (the
// job manager finds the element); `fields` added. fail() naming it.
nlohmann::json job_request(const std::string& text, nlohmann::json fields = nlohmann::json::object());
// The id of the job `text` names, ID[INDEX] asked of the job manager.
JobId job_id_argument(Client& client, const std::string& text);
// A signal from its name (TERM, SIGTERM, term) or number; fails naming
// OPTION and the forms accepted.
int signal_number(const std::string& text, std::string_view option);
// The user's name for `uid` (the number when it has none).
std::string user_name(uint32_t uid);

// job-manager.list's answer: rows of values in the order of its columns.
class JobList {
  public:
    explicit JobList(nlohmann::json reply);
    size_t size() const { return rows_.size(); }
    // Field `name` of row `i` (null when absent or not applicable).
    const nlohmann::json& get(size_t i, std::string_view name) const;
    nlohmann::json object(size_t i) const;  // the row as {column: value}
    void keep_only(const std::vector<size_t>& indexes);

  private:
    std::map<std::string, size_t, std::less<>> columns_;
    nlohmann::json rows_;
};
JobList list_jobs(Client& client, const nlohmann::json& request);

// Streams a job's output and events until it is inactive; returns the exit
// code `banyan run` and `banyan job attach` end with (the job's, or 1 when
// it never finished). With `interactive`, Ctrl-C once sends SIGINT to the
// job's tasks and twice within 2 s cancels it. With `with_stdin`, what
// arrives on stdin once the job has started goes to its task 0. With
// `pty` (task 0 runs on a terminal of its own), this terminal is raw while
// attached and its size goes to the job's.
int attach_job(Client& client, JobId id, bool interactive, bool with_stdin, bool pty);
// Waits for job `id` to end (job-manager.wait) and returns its exit code
// (1 when it ended without one); prints the wait's note, if any, on stderr
// after `who` ("banyan job wait"). Fails (cli::fail) if it cannot wait.
int wait_job(Client& client, JobId id, std::string_view who);

// A user given by name or uid (OPTION names the option in the error);
// fails (cli::fail) for no such user.
uint32_t uid_of_user(const std::string& user, std::string_view option);
// A time as -S and -E take it (banyan history, banyan usage): -DURATION
// (that long before `now`), HH:MM[:SS], YYYY-MM-DD[ HH:MM], @EPOCH.
// Fails naming the option.
double moment_option(const std::string& text, std::string_view option, double now);

// Each subcommand registers itself on the app; `exit_code` receives its status.
void add_start(CLI::App& app, int& exit_code);
void add_shutdown(CLI::App& app, int& exit_code);
void add_ping(CLI::App& app, int& exit_code);
void add_overlay(CLI::App& app, int& exit_code);
void add_uptime(CLI::App& app, int& exit_code);
void add_ready(CLI::App& app, int& exit_code);
void add_dmesg(CLI::App& app, int& exit_code);
void add_keygen(CLI::App& app, int& exit_code);
void add_resource(CLI::App& app, int& exit_code);
void add_queue(CLI::App& app, int& exit_code);
void add_reservation(CLI::App& app, int& exit_code);
void add_submit(CLI::App& app, int& exit_code);
void add_run(CLI::App& app, int& exit_code);
void add_batch(CLI::App& app, int& exit_code);
void add_alloc(CLI::App& app, int& exit_code);
void add_proxy(CLI::App& app, int& exit_code);
void add_jobs(CLI::App& app, int& exit_code);
void add_history(CLI::App& app, int& exit_code);
void add_bank(CLI::App& app, int& exit_code);
void add_usage(CLI::App& app, int& exit_code);
void add_events(CLI::App& app, int& exit_code);
void add_top(CLI::App& app, int& exit_code);
// Active jobs as banyan jobs lists them by default, header first (banyan top).
std::string active_jobs_table(Client& client, bool all_users, size_t max);
void add_token(CLI::App& app, int& exit_code);
void add_cancel(CLI::App& app, int& exit_code);
void add_job(CLI::App& app, int& exit_code);

}  // namespace banyan::cli
