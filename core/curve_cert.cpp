#include "core/curve_cert.hpp"

#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <sodium.h>

#include "core/config.hpp"

namespace banyan {
namespace {

// Z85 (ZeroMQ RFC 32), the text form of CURVE keys. Done here rather than
// with libzmq's helpers: linking libzmq (and the Kerberos, PGM and NORM
// libraries it pulls in) cost every CLI command ~2.5 ms of start-up.
constexpr char kZ85[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

}  // namespace

std::string z85_encode(const uint8_t* bytes, size_t size) {
    std::string out;
    for (size_t i = 0; i + 4 <= size; i += 4) {
        uint32_t value = (uint32_t{bytes[i]} << 24) | (uint32_t{bytes[i + 1]} << 16) | (uint32_t{bytes[i + 2]} << 8) |
                         bytes[i + 3];
        char group[5];
        for (int k = 4; k >= 0; k--, value /= 85)
            group[k] = kZ85[value % 85];
        out.append(group, 5);
    }
    return out;
}

std::optional<std::vector<uint8_t>> z85_decode(std::string_view text) {
    if (text.size() % 5 != 0)
        return std::nullopt;
    std::vector<uint8_t> out;
    for (size_t i = 0; i < text.size(); i += 5) {
        uint64_t value = 0;
        for (size_t k = 0; k < 5; k++) {
            const char* at = std::strchr(kZ85, text[i + k]);
            if (text[i + k] == '\0' || !at)
                return std::nullopt;
            value = value * 85 + static_cast<uint64_t>(at - kZ85);
        }
        if (value > 0xFFFFFFFFu)
            return std::nullopt;
        for (int shift = 24; shift >= 0; shift -= 8)
            out.push_back(static_cast<uint8_t>(value >> shift));
    }
    return out;
}

Result<CurveCert> CurveCert::generate() {
    uint8_t pub[crypto_box_PUBLICKEYBYTES];
    uint8_t sec[crypto_box_SECRETKEYBYTES];
    if (sodium_init() < 0 || crypto_box_keypair(pub, sec) != 0)
        return make_error(ENOTSUP, "cannot make CURVE keys: libsodium failed to start");
    CurveCert cert{z85_encode(pub, sizeof pub), z85_encode(sec, sizeof sec)};
    sodium_memzero(sec, sizeof sec);
    return cert;
}

Result<CurveCert> CurveCert::load(const std::string& path) {
    struct stat st;
    if (stat(path.c_str(), &st) < 0)
        return make_error(errno, fmt::format("{}: {}", path, std::strerror(errno)));
    if (st.st_mode & (S_IRWXG | S_IRWXO))
        return make_error(EPERM, fmt::format("{}: certificate is readable by others (mode {:o}); chmod 600 it", path,
                                             st.st_mode & 0777));
    auto config = Config::load(path);
    if (!config)
        return config.error();
    if (auto r = config->check_keys("", {"curve"}); !r)
        return r.error();
    if (auto r = config->check_keys("curve", {"public-key", "secret-key"}); !r)
        return r.error();
    auto pub = config->get_string("curve.public-key");
    if (!pub)
        return pub.error();
    auto sec = config->get_string("curve.secret-key");
    if (!sec)
        return sec.error();
    for (const auto* key : {&*pub, &*sec})
        if (key->size() != 40 || !z85_decode(*key))
            return make_error(EINVAL, fmt::format("{}: {} is not a 40-character Z85 CURVE key", path,
                                                  key == &*pub ? "curve.public-key" : "curve.secret-key"));
    return CurveCert{*pub, *sec};
}

Result<void> CurveCert::save(const std::string& path) const {
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return make_error(errno, fmt::format("{}: {}", path, std::strerror(errno)));
    std::string text = fmt::format(
        "# Banyan cluster certificate. Every broker of the instance needs this\n"
        "# file; keep it secret (mode 0600).\n"
        "[curve]\npublic-key = \"{}\"\nsecret-key = \"{}\"\n",
        public_key, secret_key);
    bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    int err = errno;
    close(fd);
    if (!ok)
        return make_error(err, fmt::format("{}: {}", path, std::strerror(err)));
    return {};
}

}  // namespace banyan
