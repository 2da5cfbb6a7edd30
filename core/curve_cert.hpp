// The cluster certificate: one CURVE key pair that every broker of an
// instance holds. A broker accepts only peers that prove they hold it, so
// a broker with another certificate is refused. Stored as TOML:
//   [curve]
//   public-key = "<40 Z85 chars>"
//   secret-key = "<40 Z85 chars>"
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"

namespace banyan {

struct CurveCert {
    std::string public_key;  // Z85, 40 characters
    std::string secret_key;

    // A fresh key pair (libsodium's, as libzmq makes them). Error only if
    // libsodium cannot start.
    static Result<CurveCert> generate();
    // Error names the file and what is wrong with it. It holds the secret
    // key: refused if others may read it, or its group may write it, or its
    // group may read it and is not one of this process's.
    static Result<CurveCert> load(const std::string& path);
    // Writes with mode 0600; refuses to overwrite an existing file.
    Result<void> save(const std::string& path) const;
};

// Z85 (ZeroMQ RFC 32): 4 bytes per 5 characters. Encoding takes whole
// 4-byte groups; decoding refuses a length not a multiple of 5, a
// character outside the alphabet, or a group over 2^32 - 1.
std::string z85_encode(const uint8_t* bytes, size_t size);
std::optional<std::vector<uint8_t>> z85_decode(std::string_view text);

}  // namespace banyan
