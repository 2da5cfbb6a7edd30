// banyan job info|eventlog|attach|wait|wait-event|urgency|update|requeue|hold|release: one job's details, history
// and output (doc/spec/jobs.md §7).
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>
#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "cmd/cli_util.hpp"
#include "cmd/profile_report.hpp"
#include "cmd/progress.hpp"
#include "core/duration.hpp"
#include "core/idset.hpp"
#include "core/io_data.hpp"
#include "core/json_field.hpp"
#include "core/reactor.hpp"

namespace banyan::cli {
namespace {

volatile std::sig_atomic_t interrupts = 0;
extern "C" void count_interrupt(int) {
    interrupts = interrupts + 1;
}

// --pty: this terminal is raw while attached, so every key (Ctrl-C,
// Ctrl-Z, arrows) goes to the job's terminal, which acts on it; it is put
// back however the CLI ends.
termios saved_terminal;
volatile std::sig_atomic_t terminal_raw = 0;
volatile std::sig_atomic_t window_changed = 0;

void restore_terminal() {
    if (terminal_raw) {
        tcsetattr(0, TCSAFLUSH, &saved_terminal);  // (async-signal-safe)
        terminal_raw = 0;
    }
}
extern "C" void restore_terminal_and_die(int signo) {
    restore_terminal();
    std::signal(signo, SIG_DFL);
    std::raise(signo);
}
extern "C" void note_window_change(int) {
    window_changed = 1;
}

void make_terminal_raw() {
    if (terminal_raw || !isatty(0) || tcgetattr(0, &saved_terminal) != 0)
        return;
    termios raw = saved_terminal;
    cfmakeraw(&raw);
    if (tcsetattr(0, TCSADRAIN, &raw) != 0)  // (what was typed ahead stays, for the job)
        return;
    terminal_raw = 1;
    std::atexit(restore_terminal);
    for (int signo : {SIGTERM, SIGHUP, SIGQUIT})
        std::signal(signo, restore_terminal_and_die);
    std::signal(SIGWINCH, note_window_change);
    window_changed = 1;  // (it may have changed while the job waited)
}

// This terminal's size, for the job's: sent once the tasks run and again
// at each change.
void send_window_size(Client& client, JobId id) {
    winsize size{};
    if (ioctl(0, TIOCGWINSZ, &size) != 0 || size.ws_row == 0 || size.ws_col == 0)
        return;
    nlohmann::json input{{"id", id}, {"data", ""}, {"winsize", {{"rows", size.ws_row}, {"cols", size.ws_col}}}};
    (void)client.send(Message::request("job-manager.input", input, 0));
}

nlohmann::json ask(Client& client, const std::string& topic, const nlohmann::json& body) {
    return must(client.rpc(topic, body, 0));
}

std::string event_line(const nlohmann::json& ev) {
    double ts = answer_field<double>(ev, "timestamp", 0.0);
    std::string line = fmt::format("{}.{:03} {}", format_moment(ts),
                                   static_cast<int>((ts - static_cast<double>(static_cast<std::time_t>(ts))) * 1000),
                                   answer_field<std::string>(ev, "name", ""));
    const nlohmann::json context = answer_field<nlohmann::json>(ev, "context", nlohmann::json::object());
    for (const auto& [key, value] : context.items()) {
        if (key == "R")
            continue;  // `banyan job info` shows it
        line += " " + key + "=" + (value.is_string() ? value.get<std::string>() : value.dump());
    }
    return line;
}

void write_all(FILE* stream, const std::string& data) {
    std::fwrite(data.data(), 1, data.size(), stream);
    std::fflush(stream);
}

}  // namespace

// Reads what is on stdin now (never blocks) and sends it to task 0;
// false once stdin has ended and that was said.
bool forward_stdin(Client& client, JobId id) {
    pollfd p{0, POLLIN, 0};
    if (poll(&p, 1, 0) <= 0)
        return true;
    char buf[65536];
    ssize_t n = read(0, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return true;
    bool eof = n <= 0;
    nlohmann::json input{{"id", id}, {"eof", eof}};
    put_io_data(input, std::string_view(buf, n > 0 ? static_cast<size_t>(n) : 0));
    // The answer is not waited for: it comes back with a matchtag nobody asks.
    (void)client.send(Message::request("job-manager.input", input, 0));
    return !eof;
}

int wait_job(Client& client, JobId id, std::string_view who) {
    auto r = client.rpc("job-manager.wait", {{"id", id}}, 0);
    if (!r)
        fail(r.error().message);
    if (r->contains("note") && (*r)["note"].is_string())
        fmt::print(stderr, "{}: {}: {}\n", who, format_jobid(id), (*r)["note"].get<std::string>());
    auto status = json_field<int64_t>(*r, "status", -1);
    if (status && *status >= 0)
        return static_cast<int>(*status);
    auto result = json_field<std::string>(*r, "result", "");
    return result && *result == "completed" ? 0 : 1;
}

// banyan job wait --all: one streaming request; the job manager takes the
// list at once and answers each job as it ends, so none is purged in
// between. 1 if any did not complete.
int wait_all_jobs(Client& client, bool progress) {
    Message request = Message::request("job-manager.wait-all", nlohmann::json::object(), 0);
    request.flags |= msgflag::streaming;
    uint32_t matchtag = must(client.send(std::move(request)));
    std::optional<ProgressBar> bar;
    uint64_t expected = 0, answered = 0;
    int exit_code = 0;
    for (;;) {
        Message m = must(client.recv());
        if (m.type != MessageType::response || m.matchtag != matchtag)
            continue;
        if (m.errnum == ENODATA && bar)
            break;
        auto r = must(response_payload(m));
        if (!bar) {  // the first answer: how many there are
            if (!r.contains("jobs"))
                fail("unexpected reply from the instance: no job count");
            expected = must(json_field<uint64_t>(r, "jobs", 0, "wait-all"));
            bar.emplace("wait", expected, progress_wanted(progress));
            continue;
        }
        auto id = json_field<uint64_t>(r, "id", 0, "wait-all");
        auto result = json_field<std::string>(r, "result", "", "wait-all");
        auto note = json_field<std::string>(r, "note", "", "wait-all");
        if (auto e = first_error(id, result, note))
            fail(e->message);
        if (!r.contains("id") || result->empty())
            fail("unexpected reply from the instance: an answer without its job");
        if (*result != "completed") {
            bar->print_line(fmt::format("banyan job wait: {}: {}", format_jobid(*id), note->empty() ? *result : *note));
            exit_code = 1;
        }
        answered++;
        bar->advance();
    }
    if (answered != expected)
        fail(fmt::format("unexpected reply from the instance: {} answers for {} jobs", answered, expected));
    return exit_code;
}

int attach_job(Client& client, JobId id, bool interactive, bool with_stdin, bool pty) {
    std::string jid = format_jobid(id);
    if (interactive) {
        interrupts = 0;
        struct sigaction sa {};
        sa.sa_handler = count_interrupt;
        sigaction(SIGINT, &sa, nullptr);
    }
    uint32_t events_from = 0, output_from = 0;
    std::optional<int> status;
    bool excepted = false;
    int seen_interrupts = 0;
    Clock::time_point last_interrupt{};
    bool started = false;  // input is sent once the tasks exist
    for (;;) {
        auto tag = must(client.send(Message::request(
            "job-manager.attach", {{"id", id}, {"events_from", events_from}, {"output_from", output_from}}, 0)));
        std::optional<Message> answer;
        while (!answer) {
            auto msg = client.recv(std::chrono::milliseconds(with_stdin && started ? 10 : 100));
            if (pty && started && window_changed) {
                window_changed = 0;
                send_window_size(client, id);
            }
            if (with_stdin && started)
                with_stdin = forward_stdin(client, id);
            if (msg && msg->matchtag == tag)
                answer = std::move(*msg);
            else if (!msg && msg.error().code != ETIMEDOUT)
                fail(msg.error().message);
            if (interrupts > seen_interrupts) {
                seen_interrupts = interrupts;
                auto now = Clock::now();
                bool again = now - last_interrupt < std::chrono::seconds(2);
                last_interrupt = now;
                // Answers to these come back on this connection; they are
                // told apart by their matchtag and not waited for.
                if (again) {
                    fmt::print(stderr, "banyan: canceling job {}\n", jid);
                    (void)client.send(Message::request("job-manager.cancel", {{"id", id}}, 0));
                } else {
                    fmt::print(stderr, "banyan: sending SIGINT to job {} (Ctrl-C again within 2 s cancels it)\n", jid);
                    (void)client.send(Message::request("job-manager.kill", {{"id", id}, {"signal", SIGINT}}, 0));
                }
            }
        }
        auto body = must(response_payload(*answer));
        for (const auto& chunk : answer_field<nlohmann::json>(body, "output", nlohmann::json::array()))
            write_all(answer_field<std::string>(chunk, "stream", "") == "stderr" ? stderr : stdout,
                      must(io_data(chunk, "attach")));
        for (const auto& ev : answer_field<nlohmann::json>(body, "events", nlohmann::json::array())) {
            const nlohmann::json c = answer_field<nlohmann::json>(ev, "context", nlohmann::json::object());
            const std::string name = answer_field<std::string>(ev, "name", "");
            if (name == "finish")
                status = static_cast<int>(answer_field<int64_t>(c, "status", 1));
            if (name == "requeue") {  // the run that counts is the next
                status.reset();
                excepted = false;
                fmt::print(stderr, "banyan: job {}: requeued: {}\n", jid, answer_field<std::string>(c, "note", ""));
            }
            if (name == "start") {
                started = true;
                // Raw once the tasks run, not while the job waits: until
                // then Ctrl-C is this command's (doc: banyan-run(1)).
                if (pty)
                    make_terminal_raw();
            }
            if (name == "exception") {
                excepted = true;
                fmt::print(stderr, "banyan: job {}: {}: {}\n", jid, answer_field<std::string>(c, "type", ""),
                           answer_field<std::string>(c, "note", ""));
            }
        }
        events_from = answer_field<uint32_t>(body, "events_next", events_from);
        output_from = answer_field<uint32_t>(body, "output_next", output_from);
        if (answer_field<bool>(body, "done", false))
            break;
    }
    if (interactive)
        std::signal(SIGINT, SIG_DFL);
    restore_terminal();
    if (status)
        return *status;
    return excepted ? 1 : 0;
}

namespace {

// banyan job wait-event: follows the job's eventlog (job-manager.attach
// without its output) until an event named `name` is committed, and prints
// it; fails when the job ends without one or `timeout` (seconds, 0: none;
// `timeout_text` as the user gave it) passes first.
int wait_event(Client& client, JobId id, const std::string& name, double timeout, const std::string& timeout_text) {
    std::string jid = format_jobid(id);
    auto deadline =
        timeout > 0 ? Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout))
                    : Clock::time_point::max();
    constexpr uint32_t kNoOutput = std::numeric_limits<uint32_t>::max();  // (an attach that reads none)
    uint32_t events_from = 0;
    for (;;) {
        auto tag = must(client.send(Message::request(
            "job-manager.attach", {{"id", id}, {"events_from", events_from}, {"output_from", kNoOutput}}, 0)));
        std::optional<Message> answer;
        while (!answer) {
            auto now = Clock::now();
            if (now >= deadline)
                fail(fmt::format("{}: no {} event within {}", jid, name, timeout_text));
            auto wait = std::min<Clock::duration>(deadline - now, std::chrono::milliseconds(100));
            auto msg =
                client.recv(std::chrono::duration_cast<std::chrono::milliseconds>(wait) + std::chrono::milliseconds(1));
            if (msg && msg->matchtag == tag)
                answer = std::move(*msg);
            else if (!msg && msg.error().code != ETIMEDOUT)
                fail(msg.error().message);
        }
        auto body = must(response_payload(*answer));
        auto events = json_field<nlohmann::json>(body, "events", nlohmann::json::array(), "attach");
        auto next = json_field<uint32_t>(body, "events_next", events_from, "attach");
        auto done = json_field<bool>(body, "done", false, "attach");
        if (auto e = first_error(events, next, done))
            fail(e->message);
        for (const auto& ev : *events)
            if (json_field<std::string>(ev, "name", "").value_or("") == name) {
                fmt::print("{}\n", event_line(ev));
                return 0;
            }
        events_from = *next;
        if (*done)
            fail(fmt::format("{}: the job ended with no {} event", jid, name));
    }
}

// An urgency as the user writes it: 0 to 31, hold, default or expedite.
int64_t urgency_value(const std::string& text) {
    if (text == "hold")
        return 0;
    if (text == "default")
        return 16;
    if (text == "expedite")
        return 31;
    auto v = parse_decimal(text, 31, "URGENCY");
    if (!v)
        fail(fmt::format("{}: expected 0 to 31, hold, default or expedite", text));
    return static_cast<int64_t>(*v);
}

}  // namespace

void add_job(CLI::App& app, int& exit_code) {
    auto* job = app.add_subcommand("job", "One job: info, eventlog, attach, wait, urgency, priority, kill");
    job->require_subcommand(1);
    static std::string id_text;

    auto* info = job->add_subcommand("info", "Print the job's summary, jobspec and R as JSON");
    info->add_option("ID", id_text, "job id")->required();
    info->callback([&exit_code] {
        Client client = connect_to_instance();
        fmt::print("{}\n", ask(client, "job-manager.info", job_request(id_text)).dump(2));
        exit_code = 0;
    });

    auto* profile = job->add_subcommand("profile", "Print the job's eBPF profile (--profile-ebpf) per node and task");
    profile->add_option("ID", id_text, "job id")->required();
    static bool profile_json = false;
    profile->add_flag("--json", profile_json, "print it as JSON, for tools");
    profile->callback([&exit_code] {
        Client client = connect_to_instance();
        auto reply = ask(client, "job-manager.profile-get", job_request(id_text));
        fmt::print("{}", profile_json ? reply.dump(2) + "\n" : profile_report(id_text, reply));
        exit_code = 0;
    });

    auto* eventlog = job->add_subcommand("eventlog", "Print the job's eventlog, one event a line");
    eventlog->add_option("ID", id_text, "job id")->required();
    static bool json = false;
    eventlog->add_flag("--json", json, "print the events as JSON, one a line");
    eventlog->callback([&exit_code] {
        Client client = connect_to_instance();
        std::string out;
        auto reply = ask(client, "job-manager.eventlog", job_request(id_text));
        for (const auto& ev : reply["events"])
            out += (json ? ev.dump() : event_line(ev)) + "\n";
        fmt::print("{}", out);
        exit_code = 0;
    });

    auto* attach = job->add_subcommand("attach", "Stream the job's output until it ends; exit with its code");
    attach->add_option("ID", id_text, "job id")->required();
    attach->callback([&exit_code] {
        Client client = connect_to_instance();
        exit_code = attach_job(client, job_id_argument(client, id_text), true, false, false);
    });

    auto* kill = job->add_subcommand("kill", "Send a signal to the job's tasks (default SIGTERM)");
    kill->add_option("ID", id_text, "job id")->required();
    static std::string signal_text = "TERM";
    kill->add_option("-s,--signal", signal_text, "signal name or number (TERM, SIGUSR1, 9)");
    kill->callback([&exit_code] {
        int signo = signal_number(signal_text, "-s");
        Client client = connect_to_instance();
        ask(client, "job-manager.kill", job_request(id_text, {{"signal", signo}}));
        exit_code = 0;
    });

    static bool all = false, progress = false;
    auto* wait = job->add_subcommand("wait", "Wait for jobs to end; exit with the job's code (--all: 1 if any failed)");
    wait->add_option("ID", id_text, "job id");
    wait->add_flag("--all", all, "wait for all of your active jobs");
    wait->add_flag("--progress", progress, "a progress bar on stderr even when it is not a terminal (--all)");
    wait->callback([&exit_code] {
        if (all == !id_text.empty())
            fail("give a job ID or --all");
        Client client = connect_to_instance();
        if (!all) {
            exit_code = wait_job(client, job_id_argument(client, id_text), "banyan job wait");
            return;
        }
        exit_code = wait_all_jobs(client, progress);
    });

    static std::string event_name, timeout_text;
    auto* wait_event_cmd = job->add_subcommand(
        "wait-event", "Wait until the job's eventlog has EVENT (start, finish, exception, ...); print it");
    wait_event_cmd->add_option("ID", id_text, "job id")->required();
    wait_event_cmd->add_option("EVENT", event_name, "the event's name, as banyan job eventlog prints it")->required();
    wait_event_cmd->add_option("-t,--timeout", timeout_text,
                               "give up after this long (10s, 2m; a bare number: seconds)");
    wait_event_cmd->callback([&exit_code] {
        double timeout = 0;
        if (!timeout_text.empty()) {
            auto parsed = parse_duration(timeout_text, BareNumber::seconds);
            if (!parsed)
                fail(fmt::format("-t {}: {}", timeout_text, parsed.error().message));
            timeout = *parsed;
        }
        Client client = connect_to_instance();
        exit_code = wait_event(client, job_id_argument(client, id_text), event_name, timeout, timeout_text);
    });

    static std::string urgency_text;
    auto* urgency = job->add_subcommand("urgency", "Change a pending job's urgency (0-31, hold, default, expedite)");
    urgency->add_option("ID", id_text, "job id")->required();
    urgency->add_option("URGENCY", urgency_text, "0 to 31, or hold (0), default (16), expedite (31)")->required();
    urgency->callback([&exit_code] {
        int64_t value = urgency_value(urgency_text);
        Client client = connect_to_instance();
        ask(client, "job-manager.urgency", job_request(id_text, {{"urgency", value}}));
        exit_code = 0;
    });

    // As Slurm's scontrol update and Flux's flux update: a pending job's
    // time limit, name, queue or urgency.
    static std::vector<std::string> changes;
    auto* update = job->add_subcommand("update", "Change a pending job (time-limit=, name=, queue=, urgency=) or a running one (time-limit=, name=)");
    update->add_option("ID", id_text, "job id")->required();
    update->add_option("FIELD=VALUE", changes, "time-limit=30m, name=NAME, queue=QUEUE, urgency=0-31, throttle=N (an array)")->required();
    update->callback([&exit_code] {
        nlohmann::json body = job_request(id_text);
        for (const auto& change : changes) {
            size_t eq = change.find('=');
            std::string field = change.substr(0, eq), value = eq == std::string::npos ? "" : change.substr(eq + 1);
            if (eq == std::string::npos || value.empty())
                fail(fmt::format("{}: expected FIELD=VALUE (time-limit, name, queue, urgency)", change));
            if (field == "time-limit") {
                auto seconds = value == "none" ? Result<double>(0.0) : parse_duration(value);
                if (!seconds || (*seconds <= 0 && value != "none"))
                    fail(fmt::format("time-limit={}: expected a duration like 30m, 2h or 1d, or none", value));
                body["duration"] = *seconds;
            } else if (field == "name" || field == "queue") {
                body[field] = value;
            } else if (field == "urgency") {
                body["urgency"] = urgency_value(value);
            } else if (field == "throttle") {
                auto n = parse_decimal(value, UINT32_MAX, "throttle");
                if (!n)
                    fail(fmt::format("throttle={}: expected a number of elements (0: no limit)", value));
                body["throttle"] = *n;
            } else {
                fail(fmt::format("{}: cannot be updated (time-limit, name, queue, urgency, throttle)", field));
            }
        }
        Client client = connect_to_instance();
        ask(client, "job-manager.update", body);  // all of it, or none
        exit_code = 0;
    });

    // As Slurm's scontrol requeue: a running or finished job back to
    // pending, with its id.
    static std::string requeue_note;
    auto* requeue = job->add_subcommand("requeue", "Run a running or finished job again: back to pending, same id");
    requeue->add_option("ID", id_text, "job id")->required();
    requeue->add_option("--note", requeue_note, "why, for the eventlog (default: requeued by uid N)");
    requeue->callback([&exit_code] {
        Client client = connect_to_instance();
        ask(client, "job-manager.requeue", job_request(id_text, {{"note", requeue_note}}));
        exit_code = 0;
    });

    // As Slurm's sprio: each factor's part of the priority.
    static std::vector<std::string> priority_ids;
    static bool priority_json = false;
    auto* priority = job->add_subcommand("priority", "Explain pending jobs' priorities: each factor's weighted part");
    priority->add_option("ID", priority_ids, "job ids")->required();
    priority->add_flag("--json", priority_json, "print each answer as JSON (factors in [0, 1], and the weights)");
    priority->callback([&exit_code] {
        Client client = connect_to_instance();
        const char* at = "job-manager.priority";
        if (!priority_json)
            fmt::print("{:>14} {:>10} {:<12} {:>9} {:>8} {:>8} {:>8} {:>8}  {}\n", "JOBID", "PRIORITY", "BANK",
                       "FAIRSHARE", "URGENCY", "AGE", "QUEUE", "SIZE", "LIMIT");
        for (const auto& id : priority_ids) {
            auto answer = must(client.rpc("job-manager.priority", job_request(id), 0));
            if (priority_json) {
                fmt::print("{}\n", answer.dump());
                continue;
            }
            const auto& factors = json_object_at(answer, {"factors"});
            const auto& weights = json_object_at(answer, {"weights"});
            auto part = [&](const char* key) {
                double f = must(json_field<double>(factors, key, 0, at));
                double w = must(json_field<double>(weights, key, 0, at));
                return fmt::format("{:.0f}", std::floor(f * w));
            };
            std::string bank = must(json_field<std::string>(answer, "bank", "", at));
            fmt::print("{:>14} {:>10} {:<12} {:>9} {:>8} {:>8} {:>8} {:>8}  {}\n",
                       format_jobid(must(json_field<JobId>(answer, "id", 0, at))),
                       must(json_field<int64_t>(answer, "priority", 0, at)), bank.empty() ? "-" : bank,
                       part("fairshare"), part("urgency"), part("age"), part("queue"), part("size"),
                       must(json_field<std::string>(answer, "limit", "", at)));
        }
        exit_code = 0;
    });

    // What every Slurm and Flux user types first: hold is urgency 0 (the
    // job stays pending and is never scheduled), release the default 16.
    static std::vector<std::string> hold_ids;
    for (auto [name, value, help] : {std::tuple{"hold", 0, "Hold pending jobs: they stay pending until released"},
                                     std::tuple{"release", 16, "Release held jobs (urgency back to 16)"}}) {
        auto* sub = job->add_subcommand(name, help);
        sub->add_option("ID", hold_ids, "job ids")->required();
        sub->callback([&exit_code, value = value] {
            Client client = connect_to_instance();
            for (const auto& id : hold_ids)
                ask(client, "job-manager.urgency", job_request(id, {{"urgency", value}}));
            exit_code = 0;
        });
    }
}

}  // namespace banyan::cli
