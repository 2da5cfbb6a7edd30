#include "broker/pmi_client.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "core/idset.hpp"
#include "core/pmi_wire.hpp"

namespace banyan {
namespace {

Result<uint32_t> env_number(const char* name, uint64_t max) {
    const char* text = std::getenv(name);
    if (!text || !*text)
        return make_error(ENOENT, fmt::format("{} is not set: not started by a PMI-1 server (a job's shell)", name));
    auto value = parse_decimal(text, max, name);
    if (!value)
        return value.error();
    return static_cast<uint32_t>(*value);
}

}  // namespace

Result<PmiClient> PmiClient::connect() {
    auto fd = env_number("PMI_FD", 1 << 20);
    auto rank = env_number("PMI_RANK", (1u << 20) - 1);
    auto size = env_number("PMI_SIZE", 1u << 20);
    if (auto e = first_error(fd, rank, size))
        return *e;
    if (*rank >= *size)
        return make_error(EINVAL, fmt::format("PMI_RANK {} is not below PMI_SIZE {}", *rank, *size));
    PmiClient c;
    c.fd_ = UniqueFd(static_cast<int>(*fd));
    c.rank_ = *rank;
    c.size_ = *size;
    if (auto r = c.call("cmd=init pmi_version=1 pmi_subversion=1", "response_to_init"); !r)
        return r.error();
    auto name = c.call("cmd=get_my_kvsname", "my_kvsname");
    if (!name)
        return name.error();
    c.kvsname_ = (*name)["kvsname"];
    return c;
}

Result<std::map<std::string, std::string>> PmiClient::call(const std::string& command, const std::string& expect) {
    std::string line = command + "\n";
    for (size_t done = 0; done < line.size();) {
        ssize_t n = write(fd_.get(), line.data() + done, line.size() - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return make_error(errno ? errno : EPIPE, fmt::format("PMI-1: {}: {}", expect, std::strerror(errno)));
        done += static_cast<size_t>(n);
    }
    std::string answer;
    for (char c;;) {
        ssize_t n = read(fd_.get(), &c, 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return make_error(EPIPE, fmt::format("PMI-1: the server closed the connection (waiting for {})", expect));
        if (c == '\n')
            break;
        answer += c;
        if (answer.size() > 65536)
            return make_error(EPROTO, "PMI-1: an answer longer than 64 KiB");
    }
    auto parsed = parse_pmi_line(answer);
    if (!parsed)
        return make_error(EPROTO, fmt::format("PMI-1: a malformed answer '{}'", answer));
    auto& words = *parsed;
    if (words["cmd"] != expect || words["rc"] != "0")
        return make_error(EPROTO,
                          fmt::format("PMI-1: '{}' answered '{}'", command.substr(0, command.find(' ')), answer));
    return words;
}

Result<void> PmiClient::put(const std::string& key, const std::string& value) {
    auto r = call(fmt::format("cmd=put kvsname={} key={} value={}", kvsname_, key, value), "put_result");
    if (!r)
        return r.error();
    return {};
}

Result<void> PmiClient::barrier() {
    auto r = call("cmd=barrier_in", "barrier_out");
    if (!r)
        return r.error();
    return {};
}

Result<std::string> PmiClient::get(const std::string& key) {
    auto r = call(fmt::format("cmd=get kvsname={} key={}", kvsname_, key), "get_result");
    if (!r)
        return r.error();
    return (*r)["value"];
}

void PmiClient::abort(int status, const std::string& message) {
    std::string text = message;
    std::replace(text.begin(), text.end(), '\n', ' ');  // one line
    std::string line = fmt::format("cmd=abort exitcode={} message={}\n", status, text);
    if (write(fd_.get(), line.data(), line.size()) < 0) {
        // The shell is gone: the job ends with this task anyway.
    }
    fd_.reset();
}

Result<void> PmiClient::finalize() {
    auto r = call("cmd=finalize", "finalize_ack");
    fd_.reset();
    for (const char* name : {"PMI_FD", "PMI_RANK", "PMI_SIZE", "PMI_SPAWNED"})
        unsetenv(name);
    if (!r)
        return r.error();
    return {};
}

}  // namespace banyan
