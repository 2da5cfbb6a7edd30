// Helpers shared by the subcommands of `banyan`: one-line errors and the
// connection to the local broker.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "core/client.hpp"
#include "core/result.hpp"

namespace banyan::cli {

// Thrown by a subcommand to end with "banyan CMD: MESSAGE" and `exit_code`.
struct Failure {
    std::string message;
    int exit_code = 1;
};

[[noreturn]] void fail(std::string message, int exit_code = 1);
// The value of `r`, or fail() with its error.
template <class T>
T must(Result<T> r) {
    if (!r)
        fail(r.error().message);
    return std::move(r).value();
}
inline void must(Result<void> r) {
    if (!r)
        fail(r.error().message);
}

// Connects to the instance named by $BANYAN_URI, or fails with a clear line.
Client connect_to_instance();

// Each subcommand registers itself on the app; `exit_code` receives its status.
void add_start(CLI::App& app, int& exit_code);
void add_shutdown(CLI::App& app, int& exit_code);
void add_ping(CLI::App& app, int& exit_code);
void add_overlay(CLI::App& app, int& exit_code);
void add_uptime(CLI::App& app, int& exit_code);
void add_dmesg(CLI::App& app, int& exit_code);
void add_keygen(CLI::App& app, int& exit_code);
void add_resource(CLI::App& app, int& exit_code);

}  // namespace banyan::cli
