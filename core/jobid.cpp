#include "core/jobid.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>

#include <fmt/format.h>

namespace banyan {
namespace {

constexpr std::string_view kAlphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
constexpr uint64_t kEpochMs = 1735689600000;  // 2025-01-01T00:00:00Z
constexpr int kSequenceBits = 24;
constexpr uint64_t kSequenceMask = (uint64_t{1} << kSequenceBits) - 1;

Error not_a_jobid(std::string_view text, std::string_view why) {
    return make_error(EINVAL, fmt::format("{}: not a job id ({})", text, why));
}

}  // namespace

std::string format_jobid(JobId id) {
    std::string digits;
    do {
        digits.push_back(kAlphabet[id % 58]);
        id /= 58;
    } while (id > 0);
    std::reverse(digits.begin(), digits.end());
    return "f" + digits;
}

Result<JobId> parse_jobid(std::string_view text) {
    std::string_view body = text;
    bool base58 = false;
    if (body.starts_with("f")) {
        body.remove_prefix(1);
        base58 = true;
    } else if (body.starts_with("\xc6\x92")) {  // ƒ in UTF-8
        body.remove_prefix(2);
        base58 = true;
    }
    if (body.empty() || body.size() > 20)
        return not_a_jobid(text, "expected fBASE58 as printed, or a decimal number");
    const uint64_t base = base58 ? 58 : 10;
    uint64_t id = 0;
    for (char c : body) {
        uint64_t digit;
        if (base58) {
            auto pos = kAlphabet.find(c);
            if (pos == std::string_view::npos)
                return not_a_jobid(text, fmt::format("'{}' is not a base58 digit", c));
            digit = pos;
        } else {
            if (c < '0' || c > '9')
                return not_a_jobid(text, "expected fBASE58 as printed, or a decimal number");
            digit = static_cast<uint64_t>(c - '0');
        }
        if (id > (UINT64_MAX - digit) / base)
            return not_a_jobid(text, "too large");
        id = id * base + digit;
    }
    return id;
}

Result<JobRef> parse_job_ref(std::string_view text) {
    size_t open = text.find('[');
    if (open == std::string_view::npos) {
        auto id = parse_jobid(text);
        if (!id)
            return id.error();
        return JobRef{*id, std::nullopt};
    }
    if (!text.ends_with(']'))
        return not_a_jobid(text, "expected ID or ID[INDEX]");
    auto id = parse_jobid(text.substr(0, open));
    if (!id)
        return id.error();
    std::string_view digits = text.substr(open + 1, text.size() - open - 2);
    uint64_t index = 0;
    if (digits.empty() || digits.size() > 10)
        return not_a_jobid(text, "the index in [] must be a number");
    for (char c : digits) {
        if (c < '0' || c > '9')
            return not_a_jobid(text, "the index in [] must be a number");
        index = index * 10 + static_cast<uint64_t>(c - '0');
    }
    if (index > UINT32_MAX)
        return not_a_jobid(text, "the index in [] is too large");
    return JobRef{*id, static_cast<uint32_t>(index)};
}

std::string format_element(JobId array, uint32_t index) {
    return fmt::format("{}[{}]", format_jobid(array), index);
}

JobIdGenerator::JobIdGenerator(JobId after) : last_ms_(after >> kSequenceBits), sequence_(after & kSequenceMask) {}

JobId JobIdGenerator::next(uint64_t now_ms) {
    uint64_t ms = now_ms > kEpochMs ? now_ms - kEpochMs : 0;
    if (ms > last_ms_) {
        last_ms_ = ms;
        sequence_ = 0;
    } else if (++sequence_ > kSequenceMask) {
        last_ms_++;
        sequence_ = 0;
    }
    return (last_ms_ << kSequenceBits) | sequence_;
}

JobId JobIdGenerator::next() {
    auto now = std::chrono::system_clock::now().time_since_epoch();
    return next(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(now).count()));
}

uint64_t JobIdGenerator::epoch_ms(JobId id) { return (id >> kSequenceBits) + kEpochMs; }

}  // namespace banyan
