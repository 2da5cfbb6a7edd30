// banyan token create: a bearer token for the instance's HTTP API
// (doc/spec/http.md §2), made and signed by rank 0.
#include <cerrno>

#include <pwd.h>

#include <fmt/format.h>

#include "cmd/cli_util.hpp"
#include "core/json_field.hpp"

namespace banyan::cli {
namespace {

uint32_t uid_of(const std::string& user) {
    if (!user.empty() && user.find_first_not_of("0123456789") == std::string::npos) {
        auto n = std::stoull(user.size() > 10 ? std::string("99999999999") : user);
        if (n > 0xfffffffe)
            fail(fmt::format("--user {}: not a user id", user));
        return static_cast<uint32_t>(n);
    }
    const passwd* pw = getpwnam(user.c_str());
    if (!pw)
        fail(fmt::format("--user {}: no such user", user));
    return pw->pw_uid;
}

}  // namespace

void add_token(CLI::App& app, int& exit_code) {
    auto* token = app.add_subcommand("token", "Tokens for the HTTP API");
    token->require_subcommand(1);
    static std::string user, expires;
    auto* create = token->add_subcommand("create", "Make a bearer token for the HTTP API and print it");
    create->add_option("--user", user, "USER (name or uid): the token's user (the instance owner only; default: you)");
    create->add_option("--expires", expires, "how long it is good for: 30m, 12h, 7d (default 1d, at most 365d)");
    create->callback([&exit_code] {
        nlohmann::json body = nlohmann::json::object();
        if (!user.empty())
            body["uid"] = uid_of(user);
        if (!expires.empty())
            body["expires"] = expires;
        Client client = connect_to_instance();
        auto answer = must(client.rpc("http.token", body, 0));
        auto text = json_field<std::string>(answer, "token", "", "http.token");
        if (!text || text->empty())
            fail("unexpected reply from the instance: no token");
        fmt::print("{}\n", *text);
        exit_code = 0;
    });
}

}  // namespace banyan::cli
