// Mail about jobs (doc/spec/jobs.md §10): Slurm's --mail-type and
// --mail-user, sent through the host's sendmail without the loop ever
// waiting for it.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/reactor.hpp"
#include "core/result.hpp"
#include "core/slurm_names.hpp"

namespace banyan {

struct Job;

// What a job asked to be mailed about: MailEvent bits (core/slurm_names), and to whom ("":
// its user).
struct MailRequest {
    uint8_t events = 0;
    std::string user;
};

// attributes.system.mail of a jobspec; nullptr when it asks for nothing.
// Error: a type Slurm has not, or a field of the wrong kind.
Result<std::shared_ptr<const MailRequest>> read_mail_request(const nlohmann::json& system);

class Mailer {
  public:
    // `program` empty or not executable: mail is off.
    Mailer(Reactor& reactor, std::string program);
    ~Mailer();
    Mailer(const Mailer&) = delete;
    Mailer& operator=(const Mailer&) = delete;

    // "" when mail is on; else why it is off, in one line.
    const std::string& off_reason() const { return off_reason_; }
    // Mails the job's recipient about `event` if it asked for it (one of
    // kMailBegin, kMailEnd (its end, however it ended), kMailRequeue).
    void job_event(const Job& job, MailEvent event);

  private:
    struct Letter {
        std::string to;
        std::string text;  // headers, a blank line, the body
    };
    void start_next();

    Reactor& reactor_;
    std::string program_;
    std::string off_reason_;
    std::deque<Letter> waiting_;
    std::map<uint64_t, std::unique_ptr<Subprocess>> running_;
    uint64_t next_key_ = 0;
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // posted callbacks check it
};

}  // namespace banyan
