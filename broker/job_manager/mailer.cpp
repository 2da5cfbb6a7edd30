#include "broker/job_manager/mailer.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "broker/job_manager/job.hpp"
#include "core/duration.hpp"
#include "core/json_field.hpp"
#include "core/log.hpp"
#include "core/slurm_names.hpp"
#include "core/unique_fd.hpp"

namespace banyan {
namespace {

constexpr size_t kMaxRunning = 8;        // sendmail processes at a time
constexpr size_t kMaxWaiting = 10'000;   // letters queued behind them
constexpr size_t kMaxLetterBytes = 4096;  // one page: any pipe takes it at once
constexpr size_t kMaxNameBytes = 256;     // of a job name in a letter

// The job's user's name, the default recipient (Slurm's too).
std::string user_name(uint32_t uid) {
    passwd pw{};
    passwd* found = nullptr;
    char buffer[4096];
    if (getpwuid_r(uid, &pw, buffer, sizeof buffer, &found) != 0 || !found)
        return "";
    return pw.pw_name;
}

// A job name as a header may carry it: its control characters (a line
// break would start a header of the user's) made '?'.
std::string header_safe(std::string text) {
    if (text.size() > kMaxNameBytes)
        text.resize(kMaxNameBytes);
    for (char& c : text)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
            c = '?';
    return text;
}

// Slurm's subject line for an event; "" when the job did not ask for it.
std::string subject_of(const Job& job, MailEvent event, uint8_t asked) {
    std::string head = fmt::format("Banyan Job_id={} Name={}", job.id, header_safe(job.name));
    double ran = job.t_run > 0 ? (job.t_finish > 0 ? job.t_finish : job.t_inactive) - job.t_run : 0;
    if (event == kMailBegin)
        return asked & kMailBegin
                   ? fmt::format("{} Began, Queued time {}", head, slurm_duration(job.t_run - job.t_submit))
                   : "";
    if (event == kMailRequeue)
        return asked & kMailRequeue ? fmt::format("{} Requeued, Run time {}", head, slurm_duration(ran)) : "";
    if (job.exception_type == "dependency")
        return asked & kMailInvalidDepend ? fmt::format("{} Dependency never satisfied", head) : "";
    std::string state = slurm_ended_state(job.result(), job.exception_type);
    bool completed = state == "COMPLETED";
    if (!(asked & kMailEnd) && (completed || !(asked & kMailFail)))
        return "";
    bool failed = state == "FAILED" || state == "OUT_OF_MEMORY" || state == "NODE_FAIL";
    return fmt::format("{} {}, Run time {}, {}, ExitCode {}", head, failed ? "Failed" : "Ended",
                       slurm_duration(ran), state, job.status.value_or(0));
}

}  // namespace

Result<std::shared_ptr<const MailRequest>> read_mail_request(const nlohmann::json& system) {
    const auto& mail = json_object_at(system, {"mail"});
    auto type = json_field<std::string>(mail, "type", "", "attributes.system.mail");
    auto user = json_field<std::string>(mail, "user", "", "attributes.system.mail");
    if (!type)
        return type.error();
    if (!user)
        return user.error();
    auto events = slurm_mail_types(*type);
    if (!events)
        return make_error(EINVAL, "mail.type: " + events.error().message);
    auto request = std::make_shared<MailRequest>();
    request->user = *user;
    request->events = *events;
    if (request->user.find_first_of("\r\n") != std::string::npos || request->user.starts_with("-"))
        return make_error(EINVAL, "mail.user: not an address");
    if ((request->events & ~kMailArrayTasks) == 0)
        return std::shared_ptr<const MailRequest>();
    return std::shared_ptr<const MailRequest>(std::move(request));
}

Mailer::Mailer(Reactor& reactor, std::string program) : reactor_(reactor), program_(std::move(program)) {
    if (program_.empty())
        off_reason_ = "mail is off on this cluster (job-manager.mail-program is \"\")";
    else if (access(program_.c_str(), X_OK) != 0)
        off_reason_ = fmt::format("mail is off on this cluster: {} is not there", program_);
}

Mailer::~Mailer() {
    *alive_ = false;
}

void Mailer::job_event(const Job& job, MailEvent event) {
    if (!job.mail || (job.array_id != 0 && !(job.mail->events & kMailArrayTasks)))
        return;
    std::string subject = subject_of(job, event, job.mail->events);
    if (subject.empty())
        return;
    if (!off_reason_.empty())
        return;  // said at submit
    std::string to = job.mail->user.empty() ? user_name(job.userid) : job.mail->user;
    if (to.empty())
        return log::warning("job-manager", "{}: no mail: uid {} has no name", format_jobid(job.id), job.userid);
    if (waiting_.size() >= kMaxWaiting)
        return log::warning("job-manager", "{}: no mail: {} letters already wait for {}", format_jobid(job.id),
                            waiting_.size(), program_);
    std::string text = fmt::format("To: {}\nSubject: {}\n\nJob {} ({}) of uid {}: {}\n", to, subject,
                                   format_jobid(job.id), job.id, job.userid, subject);
    if (text.size() > kMaxLetterBytes)
        text.resize(kMaxLetterBytes);
    waiting_.push_back({std::move(to), std::move(text)});
    start_next();
}

void Mailer::start_next() {
    while (running_.size() < kMaxRunning && !waiting_.empty()) {
        Letter letter = std::move(waiting_.front());
        waiting_.pop_front();
        int fds[2];
        if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0) {
            log::warning("job-manager", "mail to {}: pipe: {}", letter.to, std::strerror(errno));
            continue;
        }
        UniqueFd read_end(fds[0]), write_end(fds[1]);
        // The reader must block as any stdin does; the writer never may.
        fcntl(read_end.get(), F_SETFL, fcntl(read_end.get(), F_GETFL) & ~O_NONBLOCK);
        // The whole letter fits the pipe: written now, never waited for.
        if (::write(write_end.get(), letter.text.data(), letter.text.size()) !=
            static_cast<ssize_t>(letter.text.size())) {
            log::warning("job-manager", "mail to {}: cannot write the letter: {}", letter.to, std::strerror(errno));
            continue;
        }
        write_end.reset();
        uint64_t key = next_key_++;
        std::string to = letter.to;
        auto child = Subprocess::spawn(
            reactor_,
            {.argv = {program_, "-oi", "--", letter.to},
             .env = std::vector<std::string>{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"},
             .cwd = "/",
             .stdin_fd = read_end.get()},
            [this, key, to, alive = alive_](int status) {
                // Posted: the Subprocess is destroyed here, not inside its own callback.
                reactor_.post([this, key, to, status, alive] {
                    if (!*alive)
                        return;
                    running_.erase(key);
                    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                        log::warning("job-manager", "mail to {}: {} exited with status {}", to, program_,
                                     exit_code_from_wait_status(status));
                    start_next();
                });
            });
        if (!child) {
            log::warning("job-manager", "mail to {}: {}", letter.to, child.error().message);
            continue;
        }
        running_[key] = std::move(*child);
    }
}

}  // namespace banyan
