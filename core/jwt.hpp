// Bearer tokens for the HTTP API: JWTs signed HS256 with the instance's
// key (doc/spec/http.md §2), made and checked with libjwt.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.hpp"

namespace banyan {

struct TokenClaims {
    uint32_t uid = 0;
    std::string user;  // the user's name (`sub`)
    int64_t issued = 0;
    int64_t expires = 0;  // seconds since the epoch
};

// The key's id: the first 16 hex digits of its SHA-256 (the tokens' `aud`).
std::string token_key_id(std::string_view key);

// A signed token carrying `claims`.
Result<std::string> make_token(std::string_view key, const TokenClaims& claims);

// The claims of `token` if it is well formed, HS256, signed with `key`,
// meant for this key's instance and not expired at `now`; else an Error
// with one line saying which (EACCES).
Result<TokenClaims> check_token(std::string_view key, std::string_view token, int64_t now);

// Reads the key at `path`, or makes one (32 random bytes, mode 0600) if
// there is none. Error names the path (unreadable, too short).
Result<std::string> load_or_make_token_key(const std::string& path);

}  // namespace banyan
