#include "broker/job_manager/signature_check.hpp"

#include <fmt/format.h>

#include "core/json_parse.hpp"
#include "core/munge_credential.hpp"

namespace banyan {
namespace {

Result<SignedPayload> decode_credential(const std::string& credential) {
    auto decoded = decode_munge_credential(credential);
    if (!decoded)
        return make_error(EPERM, "J: the signature is " + decoded.error().message);
    if (decoded->payload.empty())
        return make_error(EPERM, "J: the signature holds no jobspec");
    auto jobspec = parse_json(decoded->payload);
    if (!jobspec || !jobspec->is_object())
        return make_error(EPERM, "J: the signature holds no jobspec (not a JSON object)");
    return SignedPayload{.uid = decoded->uid, .jobspec = std::move(*jobspec)};
}

}  // namespace

SignatureCheck::SignatureCheck(Reactor& reactor) : reactor_(reactor), thread_([this] { run(); }) {}

SignatureCheck::~SignatureCheck() {
    *alive_ = false;
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
        queue_.clear();
    }
    wake_.notify_one();
    thread_.join();
}

void SignatureCheck::decode(std::string credential, std::function<void(Result<SignedPayload>)> done) {
    bool queued = false;
    {
        std::lock_guard lock(mutex_);
        if (queue_.size() < kMaxWaiting) {
            queue_.push_back({std::move(credential), std::move(done)});
            queued = true;
        }
    }
    if (!queued) {
        // Each waiting submission holds its whole request: bounded.
        reactor_.post([alive = alive_, done = std::move(done)] {
            if (*alive)
                done(make_error(EAGAIN, fmt::format("{} signed submissions wait to be checked: try again", kMaxWaiting)));
        });
        return;
    }
    wake_.notify_one();
}

void SignatureCheck::run() {
    for (;;) {
        Work work;
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
            if (stopping_)
                return;
            work = std::move(queue_.front());
            queue_.pop_front();
        }
        auto result = std::make_shared<Result<SignedPayload>>(make_error(EIO, "J: not decoded"));
        try {
            *result = decode_credential(work.credential);
        } catch (const std::exception& e) {
            *result = make_error(EIO, fmt::format("J: {}", e.what()));
        }
        reactor_.post([alive = alive_, done = std::move(work.done), result]() mutable {
            if (*alive)
                done(std::move(*result));
        });
    }
}

}  // namespace banyan
