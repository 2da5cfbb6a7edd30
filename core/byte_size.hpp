// Sizes in bytes as users and admins write them: "512M", "4G", "1.5T",
// "4GiB", "64k" (K, M, G, T, P: powers of 1024; case does not matter; a
// trailing "B" or "iB" may follow).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.hpp"

namespace banyan {

// What a number without a unit means: bytes (config files, synthetic
// clusters), or nothing (a job's --mem, where 4096 could be bytes or MiB).
enum class BareSize { bytes, refused };

// Bytes, rounded up to a whole byte. Error EINVAL names the text and says
// what is wrong: no number, an unknown unit, a missing one (BareSize::
// refused), zero, or over `max`.
Result<uint64_t> parse_byte_size(std::string_view text, BareSize bare, uint64_t max = uint64_t{1} << 60);

// The bytes in one of `unit` as resource graphs name it ("MiB", "GB",
// "KiB": binary, as memory is counted), or 0 when it is no unit of bytes.
uint64_t bytes_per_unit(std::string_view unit);

// "512 MiB", "4 GiB", "1.5 GiB", "100 B": the largest unit the size is at
// least one of, with at most one decimal (rounded up, so a limit shown is
// never below the real one).
std::string format_byte_size(uint64_t bytes);

}  // namespace banyan
