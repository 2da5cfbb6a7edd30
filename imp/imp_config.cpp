#include "imp/imp_config.hpp"

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <sys/stat.h>

#include <fmt/format.h>

#include "core/config.hpp"
#include "core/programs.hpp"

namespace banyan {
namespace {

// The file and each directory above it: root's, and writable by no one
// else (a sticky directory such as /tmp excepted: others cannot rename
// what root made in it).
Result<void> check_root_only(const std::string& path) {
    std::filesystem::path p = std::filesystem::absolute(path).lexically_normal();
    for (std::filesystem::path at = p;; at = at.parent_path()) {
        struct stat st {};
        if (lstat(at.c_str(), &st) != 0)
            return make_error(errno, fmt::format("{}: {}", at.string(), std::strerror(errno)));
        if (S_ISLNK(st.st_mode) && at == p)
            return make_error(EPERM, fmt::format("{}: a symbolic link", at.string()));
        if (st.st_uid != 0)
            return make_error(EPERM, fmt::format("{}: owned by uid {}, not root", at.string(), st.st_uid));
        bool sticky_dir = S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX);
        if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !sticky_dir && !S_ISLNK(st.st_mode))
            return make_error(EPERM, fmt::format("{}: writable by others than root", at.string()));
        if (at == at.parent_path())
            return {};
    }
}

}  // namespace

std::string imp_config_path() {
    return system_config_dir() + "/banyan/imp.toml";
}

Result<ImpConfig> load_imp_config(const std::string& path) {
    if (auto r = check_root_only(path); !r)
        return r.error();
    auto config = Config::load(path);
    if (!config)
        return config.error();
    if (auto r = config->check_keys(
            "", {"allowed-users", "allow-root", "max-credential-age", "state-dir", "shell", "prolog", "epilog",
                 "profiling"});
        !r)
        return r.error();
    ImpConfig c;
    auto users = config->get_string_array("allowed-users", std::vector<std::string>{"banyan"});
    auto root = config->get_bool("allow-root", false);
    auto age = config->get_duration("max-credential-age", c.max_credential_age);
    auto state = config->get_string("state-dir", "/var/lib/banyan-imp");
    auto shell = config->get_string("shell", program_path("banyan-shell"));
    auto profiling = config->get_bool("profiling", false);
    if (auto e = first_error(users, root, age, state, shell, profiling))
        return *e;
    c.profiling = *profiling;
    c.profiler = program_path("banyan-profiler");
    c.allowed_users = *users;
    c.allow_root = *root;
    c.max_credential_age = *age;
    c.state_dir = *state;
    c.shell = *shell;
    for (auto [key, field] : {std::pair{"prolog", &c.prolog}, std::pair{"epilog", &c.epilog}})
        if (config->has(key)) {
            auto command = config->get_string(key);
            if (!command)
                return command.error();
            *field = *command;
        }
    return c;
}

}  // namespace banyan
