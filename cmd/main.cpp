// banyan: the command-line interface. One file per subcommand (cmd_*.cpp).
#include <cstdio>
#include <cstring>

#include <CLI/CLI.hpp>

#include "cmd/cli_util.hpp"
#include "cmd/submit_options.hpp"

using namespace banyan;

namespace {

// "banyan resource drain": the deepest subcommand that was given.
std::string command_path(const CLI::App& app) {
    std::string path = "banyan";
    for (const CLI::App* cur = &app; !cur->get_subcommands().empty();) {
        cur = cur->get_subcommands().front();
        path += " " + cur->get_name();
    }
    return path;
}

}  // namespace

int main(int argc, char** argv) {
    // banyan --job ID COMMAND...: COMMAND with BANYAN_URI set to the job's
    // nested instance (doc/spec/instances.md §5).
    if (argc > 1 && (std::strcmp(argv[1], "--job") == 0 || std::strncmp(argv[1], "--job=", 6) == 0)) {
        std::string path;
        int skip = 0;
        if (std::strcmp(argv[1], "--job") == 0 && argc > 2) {
            path = argv[2];
            skip = 2;
        } else if (std::strncmp(argv[1], "--job=", 6) == 0) {
            path = argv[1] + 6;
            skip = 1;
        } else {
            std::fprintf(stderr, "banyan: --job needs a job id (banyan --job ID COMMAND...)\n");
            return 2;
        }
        try {
            std::string uri = cli::nested_instance_uri(path);
            setenv("BANYAN_URI", uri.c_str(), 1);
        } catch (const cli::Failure& f) {
            std::fprintf(stderr, "banyan: %s\n", f.message.c_str());
            return f.exit_code;
        }
        argv[skip] = argv[0];
        argv += skip;
        argc -= skip;
        if (argc < 2) {
            std::fprintf(stderr, "banyan: --job %s: no command given\n", path.c_str());
            return 2;
        }
    }
    CLI::App app("banyan: the Banyan workload manager", "banyan");
    app.require_subcommand(1);
    int exit_code = 0;
    app.footer("banyan --job ID COMMAND...: COMMAND against job ID's nested instance (ID1/ID2 through nested ones)");
    // Only the command given is built (its options are most of a short
    // command's run time); help builds them all.
    const std::pair<const char*, void (*)(CLI::App&, int&)> commands[] = {
        {"start", cli::add_start},     {"shutdown", cli::add_shutdown}, {"ping", cli::add_ping},
        {"overlay", cli::add_overlay}, {"uptime", cli::add_uptime},     {"ready", cli::add_ready},
        {"dmesg", cli::add_dmesg},     {"keygen", cli::add_keygen},     {"resource", cli::add_resource},
        {"queue", cli::add_queue},     {"submit", cli::add_submit},     {"run", cli::add_run},
        {"batch", cli::add_batch},     {"alloc", cli::add_alloc},       {"proxy", cli::add_proxy},
        {"jobs", cli::add_jobs},       {"events", cli::add_events},     {"top", cli::add_top},
        {"token", cli::add_token},     {"cancel", cli::add_cancel},     {"job", cli::add_job},
        {"history", cli::add_history}, {"bank", cli::add_bank},
        {"usage", cli::add_usage},     {"reservation", cli::add_reservation},
    };
    bool built = false;
    for (const auto& [name, add] : commands)
        if (argc > 1 && std::strcmp(argv[1], name) == 0) {
            add(app, exit_code);
            built = true;
        }
    if (!built && argc > 1 && argv[1][0] != '-') {
        std::fprintf(stderr, "banyan: '%s' is not a banyan command (see banyan --help)\n", argv[1]);
        return 2;
    }
    if (!built)  // help, or no command: all of them, to list
        for (const auto& [name, add] : commands)
            add(app, exit_code);
    // `banyan submit|run|start [OPTIONS] -- COMMAND...`: COMMAND may start with "-".
    if (argc > 2 && (std::strcmp(argv[1], "submit") == 0 || std::strcmp(argv[1], "run") == 0 ||
                     std::strcmp(argv[1], "start") == 0 || std::strcmp(argv[1], "batch") == 0 ||
                     std::strcmp(argv[1], "alloc") == 0 || std::strcmp(argv[1], "proxy") == 0)) {
        for (int i = 2; i < argc; i++)
            if (std::strcmp(argv[i], "--") == 0) {
                cli::set_command_after_dashes({argv + i + 1, argv + argc});
                argc = i;
                break;
            }
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        // One line, naming the command, instead of CLI11's two.
        std::fprintf(stderr, "%s: %s (see --help)\n", command_path(app).c_str(), e.what());
        return e.get_exit_code();
    } catch (const cli::Failure& f) {
        std::fprintf(stderr, "%s: %s\n", command_path(app).c_str(), f.message.c_str());
        return f.exit_code;
    } catch (const std::exception& e) {
        // A reply of a shape this CLI does not expect: still one line.
        std::fprintf(stderr, "%s: unexpected reply from the instance: %s\n", command_path(app).c_str(), e.what());
        return 1;
    }
    return exit_code;
}
