#include "core/jwt.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <jwt.h>
#include <sodium.h>

#include "core/base64.hpp"
#include "core/json_field.hpp"
#include "core/json_parse.hpp"
#include "core/unique_fd.hpp"

namespace banyan {
namespace {

struct JwtFree {
    void operator()(jwt_t* j) const { jwt_free(j); }
};
using JwtPtr = std::unique_ptr<jwt_t, JwtFree>;

Error refused(std::string_view why) {
    return Error{EACCES, fmt::format("token refused: {}", why)};
}

// base64url (RFC 4648 §5) without padding, as JWTs carry it.
Result<std::string> base64url_decode(std::string_view text) {
    std::string plain(text);
    for (auto& c : plain) {
        if (c == '-')
            c = '+';
        else if (c == '_')
            c = '/';
        else if (c == '+' || c == '/' || c == '=')
            return make_error(EINVAL, "not base64url");
    }
    plain.append((4 - plain.size() % 4) % 4, '=');
    return base64_decode(plain);
}

}  // namespace

std::string token_key_id(std::string_view key) {
    unsigned char hash[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(hash, reinterpret_cast<const unsigned char*>(key.data()), key.size());
    std::string hex;
    for (size_t i = 0; i < 8; i++)
        hex += fmt::format("{:02x}", hash[i]);
    return hex;
}

Result<std::string> make_token(std::string_view key, const TokenClaims& claims) {
    jwt_t* raw = nullptr;
    if (jwt_new(&raw) != 0)
        return make_error(ENOMEM, "cannot make a token: out of memory");
    JwtPtr jwt(raw);
    bool ok = jwt_add_grant(raw, "iss", "banyan") == 0 && jwt_add_grant(raw, "sub", claims.user.c_str()) == 0 &&
              jwt_add_grant(raw, "aud", token_key_id(key).c_str()) == 0 &&
              jwt_add_grant_int(raw, "uid", static_cast<long>(claims.uid)) == 0 &&
              jwt_add_grant_int(raw, "iat", static_cast<long>(claims.issued)) == 0 &&
              jwt_add_grant_int(raw, "exp", static_cast<long>(claims.expires)) == 0 &&
              jwt_set_alg(raw, JWT_ALG_HS256, reinterpret_cast<const unsigned char*>(key.data()),
                          static_cast<int>(key.size())) == 0;
    if (!ok)
        return make_error(EINVAL, "cannot make a token: libjwt refused its claims");
    char* text = jwt_encode_str(raw);
    if (!text)
        return make_error(ENOMEM, "cannot make a token: libjwt could not encode it");
    std::string token(text);
    std::free(text);
    return token;
}

Result<TokenClaims> check_token(std::string_view key, std::string_view token, int64_t now) {
    // The header is checked first, by us: only HS256 is accepted, so a
    // token cannot pick a weaker algorithm (or "none") for itself.
    size_t dot1 = token.find('.');
    size_t dot2 = dot1 == std::string_view::npos ? dot1 : token.find('.', dot1 + 1);
    if (dot2 == std::string_view::npos || token.find('.', dot2 + 1) != std::string_view::npos || token.size() > 4096)
        return refused("not a JWT (three base64url parts)");
    auto header_text = base64url_decode(token.substr(0, dot1));
    if (!header_text)
        return refused("its header is not base64url");
    auto header = parse_json(*header_text);
    if (!header || !header->is_object())
        return refused("its header is not a JSON object");
    auto alg = json_field<std::string>(*header, "alg", "", "header");
    if (!alg || *alg != "HS256")
        return refused("its algorithm is not HS256");
    auto typ = json_field<std::string>(*header, "typ", "JWT", "header");
    if (!typ || *typ != "JWT")
        return refused("its type is not JWT");

    // The audience first, unverified, only to say which error it is: a
    // token of another instance fails its signature here too.
    auto payload_text = base64url_decode(token.substr(dot1 + 1, dot2 - dot1 - 1));
    auto payload = payload_text ? parse_json(*payload_text) : Result<nlohmann::json>(payload_text.error());
    if (!payload || !payload->is_object())
        return refused("its claims are not a JSON object");
    auto audience = json_field<std::string>(*payload, "aud", "", "claims");
    if (!audience || *audience != token_key_id(key))
        return refused("a token of another instance");

    jwt_t* raw = nullptr;
    std::string text(token);
    int rc = jwt_decode(&raw, text.c_str(), reinterpret_cast<const unsigned char*>(key.data()),
                        static_cast<int>(key.size()));
    JwtPtr jwt(raw);
    if (rc != 0 || !raw || jwt_get_alg(raw) != JWT_ALG_HS256)
        return refused("its signature does not match this instance's key");
    errno = 0;
    long uid = jwt_get_grant_int(raw, "uid");
    if (errno != 0 || uid < 0 || uid > 0xfffffffe)
        return refused("no uid");
    errno = 0;
    long exp = jwt_get_grant_int(raw, "exp");
    if (errno != 0)
        return refused("no expiry (exp)");
    if (exp <= now)
        return refused(fmt::format("expired at {} (now {})", exp, now));
    TokenClaims claims;
    claims.uid = static_cast<uint32_t>(uid);
    claims.expires = exp;
    const char* sub = jwt_get_grant(raw, "sub");
    claims.user = sub ? sub : "";
    errno = 0;
    long iat = jwt_get_grant_int(raw, "iat");
    claims.issued = errno == 0 ? iat : 0;
    return claims;
}

Result<std::string> load_or_make_token_key(const std::string& path) {
    constexpr size_t kKeyBytes = 32;
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd && errno == ENOENT) {
        if (sodium_init() < 0)
            return make_error(ENOTSUP, "cannot make the HTTP token key: libsodium failed to start");
        std::string key(kKeyBytes, '\0');
        randombytes_buf(key.data(), key.size());
        UniqueFd out(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
        if (!out)
            return make_error(errno, fmt::format("{}: cannot create the HTTP token key: {}", path, strerror(errno)));
        if (::write(out.get(), key.data(), key.size()) != static_cast<ssize_t>(key.size()) || ::fsync(out.get()) != 0)
            return make_error(EIO, fmt::format("{}: cannot write the HTTP token key", path));
        return key;
    }
    if (!fd)
        return make_error(errno, fmt::format("{}: cannot read the HTTP token key: {}", path, strerror(errno)));
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || (st.st_mode & 077) != 0 || st.st_uid != geteuid())
        return make_error(EPERM, fmt::format("{}: the HTTP token key must be a file of this user's, mode 0600", path));
    std::string key(4096, '\0');
    ssize_t n = ::read(fd.get(), key.data(), key.size());
    if (n < static_cast<ssize_t>(kKeyBytes))
        return make_error(EINVAL, fmt::format("{}: the HTTP token key is shorter than {} bytes", path, kKeyBytes));
    key.resize(static_cast<size_t>(n));
    return key;
}

}  // namespace banyan
