// banyan token create: a bearer token for the instance's HTTP API
// (doc/spec/http.md §2), made and signed by rank 0.
#include <cerrno>

#include <pwd.h>

#include <fmt/format.h>

#include "cmd/cli_util.hpp"
#include "core/json_field.hpp"

namespace banyan::cli {
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
            body["uid"] = uid_of_user(user, "--user");
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
