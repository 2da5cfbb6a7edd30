#include "broker/job_manager/signature_check.hpp"

#include <cstdlib>

#include <fmt/format.h>
#include <munge.h>

#include "core/json_parse.hpp"

namespace banyan {
namespace {

Result<SignedPayload> decode_credential(const std::string& credential) {
    std::unique_ptr<munge_ctx, decltype(&munge_ctx_destroy)> ctx(munge_ctx_create(), munge_ctx_destroy);
    if (!ctx)
        return make_error(ENOMEM, "munge_ctx_create failed");
    void* payload = nullptr;
    int length = 0;
    uid_t uid = 0;
    gid_t gid = 0;
    munge_err_t err = munge_decode(credential.c_str(), ctx.get(), &payload, &length, &uid, &gid);
    std::unique_ptr<void, decltype(&std::free)> owned(payload, std::free);
    if (err != EMUNGE_SUCCESS && err != EMUNGE_CRED_EXPIRED && err != EMUNGE_CRED_REPLAYED) {
        const char* why = munge_ctx_strerror(ctx.get());
        return make_error(EPERM, fmt::format("J: the signature is refused by MUNGE: {}", why ? why : munge_strerror(err)));
    }
    if (!payload || length <= 0)
        return make_error(EPERM, "J: the signature holds no jobspec");
    auto jobspec = parse_json(std::string_view(static_cast<const char*>(payload), static_cast<size_t>(length)));
    if (!jobspec || !jobspec->is_object())
        return make_error(EPERM, "J: the signature holds no jobspec (not a JSON object)");
    return SignedPayload{.uid = static_cast<uint32_t>(uid), .jobspec = std::move(*jobspec)};
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
    {
        std::lock_guard lock(mutex_);
        queue_.push_back({std::move(credential), std::move(done)});
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
