#include "cmd/cli_util.hpp"

#include <pwd.h>

#include <map>

#include <fmt/format.h>

namespace banyan::cli {

void fail(std::string message, int exit_code) {
    throw Failure{std::move(message), exit_code};
}

Client connect_to_instance() {
    return must(Client::connect());
}

JobId job_id_argument(const std::string& text) {
    return must(parse_jobid(text));
}

std::string user_name(uint32_t uid) {
    static std::map<uint32_t, std::string> names;
    auto it = names.find(uid);
    if (it != names.end())
        return it->second;
    passwd* pw = getpwuid(uid);
    return names[uid] = pw ? pw->pw_name : std::to_string(uid);
}

}  // namespace banyan::cli
