#include <catch2/catch.hpp>

#include <fstream>

#include <sys/stat.h>
#include <unistd.h>

#include "core/curve_cert.hpp"

using namespace banyan;

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
