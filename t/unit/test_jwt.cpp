#include <catch2/catch.hpp>

#include <filesystem>

#include <sys/stat.h>

#include "core/base64.hpp"
#include "core/jwt.hpp"

using namespace banyan;

namespace {

const std::string kKey(32, 'k');

TokenClaims claims(int64_t now, int64_t life) {
    TokenClaims c;
    c.uid = 1000;
    c.user = "alice";
    c.issued = now;
    c.expires = now + life;
    return c;
}

// base64url without padding, as a JWT part.
std::string part(std::string_view text) {
    std::string b = base64_encode(text);
    while (!b.empty() && b.back() == '=')
        b.pop_back();
    for (auto& c : b)
        c = c == '+' ? '-' : c == '/' ? '_' : c;
    return b;
}

}  // namespace

TEST_CASE("a token made with a key is accepted with it, carrying its claims", "[jwt]") {
    auto token = make_token(kKey, claims(1000, 60));
    REQUIRE(token.ok());
    auto back = check_token(kKey, *token, 1010);
    REQUIRE(back.ok());
    CHECK(back->uid == 1000);
    CHECK(back->user == "alice");
    CHECK(back->expires == 1060);
}

TEST_CASE("tokens are refused, each with one line saying why", "[jwt]") {
    auto token = make_token(kKey, claims(1000, 60)).value();
    CHECK(check_token(kKey, token, 1060).error().message.find("expired at 1060") != std::string::npos);
    CHECK(check_token(std::string(32, 'o'), token, 1010).error().message.find("another instance") != std::string::npos);
    std::string tampered = token;
    tampered.back() = tampered.back() == 'A' ? 'B' : 'A';
    CHECK(check_token(kKey, tampered, 1010).error().message.find("signature") != std::string::npos);
    CHECK(check_token(kKey, "abc", 1010).error().message.find("not a JWT") != std::string::npos);
    CHECK(check_token(kKey, "a.b.c.d", 1010).error().message.find("not a JWT") != std::string::npos);
    // alg "none" (or any other) is refused before libjwt sees the token.
    std::string body = token.substr(token.find('.') + 1, token.rfind('.') - token.find('.') - 1);
    CHECK(check_token(kKey, part(R"({"alg":"none","typ":"JWT"})") + "." + body + ".", 1010)
              .error()
              .message.find("not HS256") != std::string::npos);
    CHECK(check_token(kKey, part(R"({"alg":"HS512","typ":"JWT"})") + "." + body + ".x", 1010)
              .error()
              .message.find("not HS256") != std::string::npos);
    CHECK(check_token(kKey, part("[1]") + "." + body + ".x", 1010).error().message.find("not a JSON object") !=
          std::string::npos);
    for (const auto& e : {check_token(kKey, token, 1060), check_token(kKey, "abc", 0)})
        CHECK(e.error().code == EACCES);
}

TEST_CASE("the token key is made once, private, and read back the same", "[jwt]") {
    auto dir = std::filesystem::temp_directory_path() / "banyan-test-jwt-key";
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    std::string path = (dir / "key").string();
    auto made = load_or_make_token_key(path);
    REQUIRE(made.ok());
    CHECK(made->size() == 32);
    struct stat st {};
    REQUIRE(stat(path.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    CHECK(load_or_make_token_key(path).value() == *made);
    chmod(path.c_str(), 0644);
    CHECK(load_or_make_token_key(path).error().message.find("mode 0600") != std::string::npos);
    std::filesystem::remove_all(dir);
}
