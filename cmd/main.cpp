// banyan: the command-line interface. One file per subcommand (cmd_*.cpp).
#include <cstdio>

#include <CLI/CLI.hpp>

#include "cmd/cli_util.hpp"

using namespace banyan;

int main(int argc, char** argv) {
    CLI::App app("banyan: the Banyan workload manager", "banyan");
    app.require_subcommand(1);
    int exit_code = 0;
    cli::add_start(app, exit_code);
    cli::add_shutdown(app, exit_code);
    cli::add_ping(app, exit_code);
    cli::add_overlay(app, exit_code);
    cli::add_uptime(app, exit_code);
    cli::add_dmesg(app, exit_code);
    cli::add_keygen(app, exit_code);
    cli::add_resource(app, exit_code);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    } catch (const cli::Failure& f) {
        std::string command = app.get_subcommands().empty() ? "" : " " + app.get_subcommands()[0]->get_name();
        std::fprintf(stderr, "banyan%s: %s\n", command.c_str(), f.message.c_str());
        return f.exit_code;
    }
    return exit_code;
}
