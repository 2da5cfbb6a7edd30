// Where Banyan's own programs and its system config are. In a build tree
// every program lands in bin/, so a program finds the others beside
// itself. Installed (`cmake --install`, the .deb), they lie in PREFIX/bin,
// PREFIX/sbin and PREFIX/libexec/banyan, and PREFIX is found from where the
// running program lies: the same binaries work under any prefix, so the
// package is made from the build that was tested.
#pragma once

#include <string>
#include <string_view>

namespace banyan {

// The path of `name` (banyan, banyan-broker, banyan-shell, banyan-imp).
std::string program_path(std::string_view name);

// Banyan's data: PREFIX/share/banyan (the dashboard's files in web/); in a
// build tree, BUILD/share/banyan.
std::string data_dir();

// The system config directory of this installation: /etc for the prefix
// /usr (as GNUInstallDirs has it), PREFIX/etc otherwise.
std::string system_config_dir();

// The system instance's local socket (banyan.service: /run/banyan), which
// the CLI uses when BANYAN_URI is unset.
inline constexpr const char* kSystemSocket = "/run/banyan/local.sock";

}  // namespace banyan
