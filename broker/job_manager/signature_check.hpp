// SignatureCheck: decodes a job's MUNGE credential (J) on a thread of its
// own, so that job-manager.submit can check who signed what before it
// acknowledges a job (doc/spec/jobs.md §2.1) while rank 0's loop never
// waits on munged. One thread, credentials decoded in the order given.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/reactor.hpp"
#include "core/result.hpp"

namespace banyan {

struct SignedPayload {
    uint32_t uid = 0;         // who signed it, by munged
    nlohmann::json jobspec;   // what they signed, parsed (an object)
};

class SignatureCheck {
  public:
    explicit SignatureCheck(Reactor& reactor);
    // Joins the thread after the credential it decodes now; a `done` that
    // has not run on the loop yet never runs.
    ~SignatureCheck();
    SignatureCheck(const SignatureCheck&) = delete;
    SignatureCheck& operator=(const SignatureCheck&) = delete;

    // Decodes `credential`, then runs done(result) on the loop, never
    // inside this call. Error (EPERM), in one line: munged refused it (or
    // does not answer), or its payload is not a jobspec object. An expired
    // or replayed credential is accepted: the job manager checks who and
    // what, banyan-imp when and how often.
    // Error EAGAIN (through `done`) when kMaxWaiting wait already.
    void decode(std::string credential, std::function<void(Result<SignedPayload>)> done);
    static constexpr size_t kMaxWaiting = 1024;

  private:
    struct Work {
        std::string credential;
        std::function<void(Result<SignedPayload>)> done;
    };
    void run();

    Reactor& reactor_;
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // read on the loop only
    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<Work> queue_;
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace banyan
