#include "core/curve_cert.hpp"

#include <algorithm>
#include <cstring>

#include <fcntl.h>
#include <grp.h>
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

bool in_my_groups(gid_t gid) {
    if (gid == getegid())
        return true;
    int n = getgroups(0, nullptr);
    std::vector<gid_t> groups(static_cast<size_t>(std::max(n, 0)));
    n = getgroups(static_cast<int>(groups.size()), groups.data());
    return n > 0 && std::find(groups.begin(), groups.begin() + n, gid) != groups.begin() + n;
}

// The file holds the secret key: no access for others, and read access at
// most for a group this process is in (Kubernetes mounts a Secret 0440 with
// the pod's fsGroup as its group).
Result<void> check_private(const std::string& path, const struct stat& st) {
    mode_t mode = st.st_mode & 0777;
    if (mode & S_IRWXO)
        return make_error(EPERM, fmt::format("{}: certificate is readable by others (mode {:o}); chmod 600 it "
                                             "(or 440, group-owned by the broker's group)",
                                             path, mode));
    if (mode & (S_IWGRP | S_IXGRP))
        return make_error(
            EPERM,
            fmt::format("{}: certificate is writable by its group (mode {:o}); chmod 600 or 440 it", path, mode));
    if ((mode & S_IRGRP) && !in_my_groups(st.st_gid)) {
        const group* g = getgrgid(st.st_gid);
        return make_error(EPERM, fmt::format("{}: certificate is readable by group {} (mode {:o}), which this "
                                             "process is not in; chmod 600 it, or chgrp it to the broker's group",
                                             path, g ? std::string(g->gr_name) : std::to_string(st.st_gid), mode));
    }
    return {};
}
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
    if (auto r = check_private(path, st); !r)
        return r.error();
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
