// Task input and output in JSON messages (doc/spec/jobs.md section 8):
// "data" holds the bytes themselves when they are valid UTF-8 (text, the
// common case), else their base64 with "encoding": "base64" beside it, so
// binary I/O arrives byte for byte.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/result.hpp"

namespace banyan {

// Sets message["data"] (and "encoding" when needed) to `bytes`.
void put_io_data(nlohmann::json& message, std::string_view bytes);
// The bytes of message["data"]. Error (EPROTO) naming `context` when it is
// missing, not a string, or its encoding is unknown or broken.
Result<std::string> io_data(const nlohmann::json& message, std::string_view context);

}  // namespace banyan
