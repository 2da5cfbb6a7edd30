// The one way Banyan reads a MUNGE credential (the `J` of a job: its
// jobspec, signed by `banyan submit`): decoded through munged, which says
// who made it, when, and what it holds.
#pragma once

#include <cstdint>
#include <ctime>
#include <string>

#include "core/result.hpp"

namespace banyan {

struct MungeCredential {
    uint32_t uid = 0;     // who made it, by munged
    time_t encoded = 0;   // when
    std::string payload;  // what it signs
};

// Decodes `credential` through munged (blocking: never on an event loop).
// A credential past MUNGE's own time-to-live, or one munged saw before, is
// still read: whoever asks decides about age and replays. Error (EPERM),
// in one line, to follow "the signature is ": "refused by MUNGE: WHY" or
// "without a time".
Result<MungeCredential> decode_munge_credential(const std::string& credential);

}  // namespace banyan
