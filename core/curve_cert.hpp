// The cluster certificate: one CURVE key pair that every broker of an
// instance holds. A broker accepts only peers that prove they hold it, so
// a broker with another certificate is refused. Stored as TOML:
//   [curve]
//   public-key = "<40 Z85 chars>"
//   secret-key = "<40 Z85 chars>"
#pragma once

#include <string>

#include "core/result.hpp"

namespace banyan {

struct CurveCert {
    std::string public_key;  // Z85, 40 characters
    std::string secret_key;

    // A fresh key pair. Error only if libzmq was built without CURVE.
    static Result<CurveCert> generate();
    // Error names the file and what is wrong with it; a certificate readable
    // by others than its owner is refused (it holds the secret key).
    static Result<CurveCert> load(const std::string& path);
    // Writes with mode 0600; refuses to overwrite an existing file.
    Result<void> save(const std::string& path) const;
};

}  // namespace banyan
