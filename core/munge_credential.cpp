#include "core/munge_credential.hpp"

#include <cstdlib>
#include <memory>

#include <fmt/format.h>
#include <munge.h>

namespace banyan {

Result<MungeCredential> decode_munge_credential(const std::string& credential) {
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
        return make_error(EPERM, fmt::format("refused by MUNGE: {}", why ? why : munge_strerror(err)));
    }
    MungeCredential out;
    out.uid = static_cast<uint32_t>(uid);
    if (munge_ctx_get(ctx.get(), MUNGE_OPT_ENCODE_TIME, &out.encoded) != EMUNGE_SUCCESS)
        return make_error(EPERM, "without a time");
    if (payload && length > 0)
        out.payload.assign(static_cast<const char*>(payload), static_cast<size_t>(length));
    return out;
}

}  // namespace banyan
