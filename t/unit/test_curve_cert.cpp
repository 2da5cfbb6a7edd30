#include <catch2/catch.hpp>

#include <fstream>

#include <sys/stat.h>
#include <unistd.h>

#include "core/curve_cert.hpp"

using namespace banyan;
using namespace std::string_literals;

namespace {
std::string temp_path(const char* name) {
    return std::string("/tmp/banyan-unit-") + std::to_string(getpid()) + "-" + name;
}
}  // namespace

TEST_CASE("a certificate saves private and loads back", "[curve]") {
    auto cert = CurveCert::generate();
    REQUIRE(cert.ok());
    CHECK(cert->public_key.size() == 40);
    std::string path = temp_path("good.cert");
    REQUIRE(cert->save(path).ok());
    struct stat st;
    REQUIRE(stat(path.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    auto loaded = CurveCert::load(path);
    REQUIRE(loaded.ok());
    CHECK(loaded->public_key == cert->public_key);
    CHECK(loaded->secret_key == cert->secret_key);
    auto again = cert->save(path);
    REQUIRE(!again.ok());
    CHECK(again.error().code == EEXIST);
    unlink(path.c_str());
}

TEST_CASE("bad certificates are refused with the reason", "[curve][malformed]") {
    std::string path = temp_path("bad.cert");
    auto write = [&](const std::string& text, mode_t mode) {
        unlink(path.c_str());
        std::ofstream(path) << text;
        chmod(path.c_str(), mode);
    };
    struct Case {
        std::string text;
        mode_t mode;
        std::string error;
    };
    const std::string key(40, 'a');
    for (const auto& c : std::vector<Case>{
             {"[curve]\npublic-key = \"" + key + "\"\nsecret-key = \"" + key + "\"\n", 0644, "readable by others"},
             {"[curve]\npublic-key = \"short\"\nsecret-key = \"" + key + "\"\n", 0600, "curve.public-key is not"},
             {"[curve]\npublic-key = \"" + key + "\"\n", 0600, "curve.secret-key: required key is missing"},
             {"[curve]\npublic-key = \"" + key + "\"\nsecret-key = \"" + key + "\"\nextra = 1\n", 0600,
              "curve.extra: unknown key"},
             {"not toml", 0600, "bad.cert:1:"},
         }) {
        INFO(c.text);
        write(c.text, c.mode);
        auto r = CurveCert::load(path);
        REQUIRE(!r.ok());
        CHECK(r.error().message.find(c.error) != std::string::npos);
    }
    unlink(path.c_str());
    CHECK(CurveCert::load(path).error().code == ENOENT);
}

TEST_CASE("a certificate may be read by the broker's group, as a Kubernetes Secret with fsGroup is", "[curve]") {
    std::string path = temp_path("group.cert");
    unlink(path.c_str());
    auto cert = CurveCert::generate();
    REQUIRE(cert.ok());
    REQUIRE(cert->save(path).ok());
    chmod(path.c_str(), 0440);
    CHECK(CurveCert::load(path).ok());
    chmod(path.c_str(), 0640);
    CHECK(CurveCert::load(path).ok());
    chmod(path.c_str(), 0660);
    auto writable = CurveCert::load(path);
    REQUIRE(!writable.ok());
    CHECK(writable.error().message == path + ": certificate is writable by its group (mode 660); chmod 600 or 440 it");
    if (geteuid() == 0 && getegid() != 65534) {
        REQUIRE(chown(path.c_str(), 0, 65534) == 0);  // a group root is not in
        chmod(path.c_str(), 0440);
        auto foreign = CurveCert::load(path);
        REQUIRE(!foreign.ok());
        CHECK(foreign.error().message.find(": certificate is readable by group ") != std::string::npos);
        CHECK(foreign.error().message.find("(mode 440), which this process is not in") != std::string::npos);
    }
    unlink(path.c_str());
}

TEST_CASE("Z85 as ZeroMQ RFC 32 defines it", "[curve]") {
    const uint8_t hello[] = {0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B};  // the RFC's example
    CHECK(z85_encode(hello, sizeof hello) == "HelloWorld");
    auto back = z85_decode("HelloWorld");
    REQUIRE(back);
    CHECK(*back == std::vector<uint8_t>(std::begin(hello), std::end(hello)));
    CHECK(!z85_decode("Hello"s + "Worl"));  // not a multiple of 5
    CHECK(!z85_decode("Hello Wor"s + "l"));  // a space is not in the alphabet
    CHECK(!z85_decode("%%%%%"));             // over 2^32 - 1
    // The public key is the secret key's Curve25519 point, as libzmq and
    // libsodium compute it: a pair made here works with libzmq's CURVE.
    auto cert = CurveCert::generate();
    REQUIRE(cert.ok());
    auto pub = z85_decode(cert->public_key), sec = z85_decode(cert->secret_key);
    REQUIRE(pub);
    REQUIRE(sec);
    CHECK(pub->size() == 32);
    CHECK(sec->size() == 32);
}
