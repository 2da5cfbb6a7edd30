// Where Banyan's own programs and its system config are. In a build tree
// every program lands in bin/, so a program finds the others beside
// itself. Installed (`cmake --install`, the .deb), they lie in PREFIX/bin,
// PREFIX/sbin and PREFIX/libexec/banyan, and PREFIX is found from where the
// running program lies: the same binaries work under any prefix, so the
// package is made from the build that was tested.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace banyan {

// The path of `name` (banyan, banyan-broker, banyan-shell, banyan-imp).
std::string program_path(std::string_view name);

// Banyan's data: PREFIX/share/banyan (the dashboard's files in web/); in a
// build tree, BUILD/share/banyan.
std::string data_dir();

// The system config directory of this installation: /etc for the prefix
// /usr (as GNUInstallDirs has it), PREFIX/etc otherwise.
std::string system_config_dir();

// This process's environment with LD_BIND_NOW=1, for a server that forks
// copies of itself (the shell fork server, `banyan-broker --fork-brokers`):
// every symbol is bound once, at its start, not lazily in each copy, where
// a lazy binding writes the copy's GOT (a page fault and a page copied).
// The server unsets it, so nothing it forks sees it.
std::vector<std::string> environment_binding_now();

// The system instance's local socket (banyan.service: /run/banyan), which
// the CLI uses when BANYAN_URI is unset.
inline constexpr const char* kSystemSocket = "/run/banyan/local.sock";

}  // namespace banyan
