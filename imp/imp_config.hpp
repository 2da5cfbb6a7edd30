// banyan-imp's settings (imp.toml, banyan-imp(8)). Root's file: it is read
// only when root owns it and only root may write it and every directory
// above it, since a setuid program must not take orders from a file its
// caller could change.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/result.hpp"

namespace banyan {

struct ImpConfig {
    std::vector<std::string> allowed_users;  // who may run banyan-imp (the brokers' user)
    bool allow_root = false;                 // jobs of root run
    double max_credential_age = 7 * 86400;   // seconds
    std::string state_dir;                   // replay records
    std::string shell;                       // the one program `exec` starts
    std::optional<std::string> prolog, epilog;
    // `profiler`: banyan-profiler runs as root for the brokers (eBPF job
    // profiles, doc/spec/profiling.md §2); off unless set. Its path is
    // found beside banyan-imp, never from the file or the caller.
    bool profiling = false;
    std::string profiler;
};

// The config path: system_config_dir()/banyan/imp.toml, found from where
// banyan-imp itself lies, never from anything its caller sets.
std::string imp_config_path();

// Error: the file or a directory above it is not root's alone, bad TOML, a
// key of the wrong type or unknown.
Result<ImpConfig> load_imp_config(const std::string& path);

}  // namespace banyan
