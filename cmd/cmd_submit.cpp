// banyan submit / banyan run: make a jobspec from options and COMMAND and
// submit it (doc/spec/jobs.md §7). submit prints the id; run streams the
// job's output and exits with its exit code.
#include <fmt/format.h>

#include "cmd/cli_util.hpp"
#include "cmd/job_signature.hpp"
#include "cmd/submit_options.hpp"
#include "core/idset.hpp"
#include "core/json_field.hpp"
#include "core/text.hpp"

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
std::vector<JobId> submit_all(Client& client, const std::vector<nlohmann::json>& jobspecs, int64_t urgency,
                              bool print) {
    std::vector<JobId> ids(jobspecs.size());
    // One credential per job: banyan-imp starts each credential's shells once.
    bool sign = instance_of_another_user(client);
    std::map<uint32_t, size_t> in_flight;  // matchtag -> index
    size_t next = 0, done = 0, printed = 0;
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
        ids[it->second] = (*body)["id"].get<JobId>();
        in_flight.erase(it);
        done++;
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

}  // namespace

void add_submit(CLI::App& app, int& exit_code) {
    static SubmitOptions o;
    static std::string cc;
    static bool quiet = false, wait = false, watch = false;
    auto* cmd = app.add_subcommand("submit", "Submit a job; print its id");
    add_submit_options(cmd, o);
    cmd->add_option("--cc", cc, "submit a copy for each index in IDSET (e.g. 1-100); {cc} in COMMAND is the index");
    cmd->add_flag("--quiet", quiet, "do not print the job ids");
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
        std::vector<nlohmann::json> jobspecs;
        if (cc.empty()) {
            jobspecs.push_back(jobspec);
        } else {
            auto set = IdSet::parse(cc);
            if (!set)
                fail("--cc " + set.error().message);
            if (set->count() > kMaxCopies)
                fail(fmt::format("--cc {}: {} jobs; one submit makes at most {}", cc, set->count(), kMaxCopies));
            set->for_each([&](uint64_t index) {
                nlohmann::json copy = jobspec;
                for (auto& arg : copy["tasks"][0]["command"])
                    arg = replace_all(arg.get<std::string>(), "{cc}", std::to_string(index));
                jobspecs.push_back(std::move(copy));
            });
        }
        Client client = connect_to_instance();
        std::vector<JobId> ids = submit_all(client, jobspecs, o.urgency, !quiet);
        exit_code = 0;
        for (JobId id : ids) {
            int code = watch ? attach_job(client, id, false, false) : wait ? wait_job(client, id, "banyan submit") : 0;
            exit_code = std::max(exit_code, code);
        }
    });
}

void add_run(CLI::App& app, int& exit_code) {
    static SubmitOptions o;
    auto* cmd = app.add_subcommand("run", "Run a job: submit it, stream its output, exit with its exit code");
    add_submit_options(cmd, o);
    cmd->prefix_command();
    cmd->footer("COMMAND...: the command to run and its arguments");
    cmd->callback([cmd, &exit_code] {
        std::vector<std::string> command = command_of(cmd);
        nlohmann::json jobspec = build_jobspec(o, command);
        check_size(jobspec);
        // Task 0 reads run's stdin, unless it reads a file (--input).
        bool with_stdin = o.input.empty();
        if (with_stdin)
            jobspec["attributes"]["system"]["shell"]["options"]["stdin"] = "forward";
        Client client = connect_to_instance();
        JobId id = submit_all(client, {jobspec}, o.urgency, false).front();
        exit_code = attach_job(client, id, true, with_stdin);
    });
}

}  // namespace banyan::cli
