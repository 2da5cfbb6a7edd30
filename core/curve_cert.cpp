#include "core/curve_cert.hpp"

#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <zmq.h>

#include "core/config.hpp"

namespace banyan {
namespace {

bool valid_z85_key(const std::string& key) {
    uint8_t raw[32];
    return key.size() == 40 && zmq_z85_decode(raw, key.c_str()) != nullptr;
}

}  // namespace

Result<CurveCert> CurveCert::generate() {
    char pub[41];
    char sec[41];
    if (zmq_curve_keypair(pub, sec) != 0)
        return make_error(ENOTSUP, fmt::format("cannot make CURVE keys: {}", zmq_strerror(zmq_errno())));
    return CurveCert{pub, sec};
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
        if (!valid_z85_key(*key))
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
