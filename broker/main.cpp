// banyan-broker: one per node. See doc/spec/overlay.md and doc/man/banyan-broker.8.md.
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <malloc.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "broker/accounting/accounting_service.hpp"
#include "broker/bootstrap.hpp"
#include "broker/broker.hpp"
#include "broker/builtin/builtin_services.hpp"
#include "broker/exec/exec_service.hpp"
#include "broker/fork_brokers.hpp"
#include "broker/http/http_service.hpp"
#include "broker/init_process.hpp"
#include "broker/initial_program.hpp"
#include "broker/job_manager/job_manager.hpp"
#include "broker/nested.hpp"
#include "broker/pmi_client.hpp"
#include "broker/reservation/reservation_service.hpp"
#include "broker/resource/resource_service.hpp"
#include "broker/sched/sched_service.hpp"
#include "broker/signal_relay.hpp"
#include "core/descriptors.hpp"
#include "core/log.hpp"
#include "core/private_dir.hpp"
#include "core/reactor.hpp"
#include "resource/discovery.hpp"

using namespace banyan;

namespace {

int fail(const std::string& message) {
    std::fprintf(stderr, "banyan-broker: %s\n", message.c_str());
    return 1;
}

std::string this_hostname() {
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    return name;
}

// systemd's notification (Type=notify): one datagram to $NOTIFY_SOCKET
// (a path, or an abstract name after '@'); nothing without it. Written
// here rather than linking libsystemd, whose own six libraries every
// broker loaded at start-up (bench/RESULTS.md, issue 41).
void notify_service_manager(const std::string& state) {
    const char* path = std::getenv("NOTIFY_SOCKET");
    if (!path || (path[0] != '/' && path[0] != '@'))
        return;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    size_t len = std::strlen(path);
    if (len >= sizeof addr.sun_path)
        return;
    std::memcpy(addr.sun_path, path, len);
    if (path[0] == '@')
        addr.sun_path[0] = '\0';
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return;
    (void)sendto(fd, state.data(), state.size(), MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&addr),
                 static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len));
    close(fd);
}

// Under `banyan start`, die with it: a test instance never outlives its starter.
void follow_starter() {
    const char* pid = std::getenv("BANYAN_START_PID");
    if (!pid)
        return;
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (std::to_string(getppid()) != pid)
        std::exit(1);  // the starter died before we could follow it
}

// $XDG_RUNTIME_DIR/banyan/rank-N (the user's own tmpfs), else
// /tmp/banyan-UID/rank-N: a stable name, so rank 0's default state
// directory inside it survives a restart. make_private_dir() refuses it if
// another user made it first.
std::string default_rundir(uint32_t rank) {
    const char* xdg = std::getenv("XDG_RUNTIME_DIR");
    if (xdg && xdg[0] == '/')
        return fmt::format("{}/banyan/rank-{}", xdg, rank);
    return fmt::format("/tmp/banyan-{}/rank-{}", getuid(), rank);
}

}  // namespace

int main(int argc, char** argv) {
    // What this broker inherited (a terminal's descriptors, a harness's)
    // is its own to use, never its jobs' (doc/spec/shell.md §1).
    banyan::mark_close_on_exec_from(3);
    banyan::skip_unneeded_hwloc_plugins();
    // `banyan start --test-size`: this broker, loaded and linked once,
    // forks the instance's brokers; each returns here with its arguments.
    if (argc >= 2 && std::strcmp(argv[1], "--fork-brokers") == 0) {
        if (argc != 3)
            return fail("--fork-brokers is run by banyan start, not by hand");
        banyan::serve_broker_forks(argc, argv);
    }
    BrokerOptions options;
    std::string level_text = "info";
    int64_t rank = -1;
    CLI::App app("banyan-broker: the Banyan daemon, one per node", "banyan-broker");
    app.add_option("-c,--config", options.config_path, "TOML config file");
    app.add_option("-r,--rank", rank,
                   "this broker's rank (default: $BANYAN_RANK, or this host's index in "
                   "bootstrap.hosts)")
        ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
    app.add_option("--rundir", options.rundir, "directory for the local socket");
    app.add_option("--statedir", options.statedir, "rank 0: directory of the database (default: RUNDIR/state)");
    app.add_option("-S,--setattr", options.settings, "override a config key: KEY=VALUE (repeatable)")
        ->allow_extra_args(false);
    app.add_option("--log-level", level_text, "error, warning, info or debug");
    app.add_option("--hostname", options.hostname, "this node's name (default: gethostname)");
    bool nested = false, batch = false;
    app.add_flag("--nested", nested,
                 "a nested instance: run as a job's tasks, bootstrap through its PMI-1, its R as resources "
                 "(no config file)");
    app.add_flag("--batch", batch, "with --nested: rank 0 runs the job's batch script, COMMAND its arguments");
    std::string signal_to = "all";
    app.add_option("--signal-to", signal_to,
                   "with --nested: rank 0 passes SIGUSR1 and SIGUSR2 on to COMMAND (script), the running jobs "
                   "(jobs) or both (all, the default)");
    std::string marker_dir;
    app.add_option("--marker-dir", marker_dir,
                   "rank 0: write banyan.start here once the instance runs, banyan.stop when it ends");
    std::string export_topology;
    app.add_option("--export-topology", export_topology,
                   "write this machine's hwloc topology to FILE and exit (banyan start --test-size: its brokers "
                   "load it as resource.topology-cache)");
    // COMMAND...: everything from the first argument that is not an option.
    app.prefix_command();
    app.footer(
        "COMMAND...: rank 0 runs it once the instance runs, then shuts the instance down and exits "
        "with its status (other ranks ignore it)");
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        return fail(fmt::format("{} (see --help)", e.what()));
    }
    if (!export_topology.empty()) {
        if (auto r = banyan::export_this_machine(export_topology); !r)
            return fail(r.error().message);
        return 0;
    }
    std::vector<std::string> command = app.remaining();
    if (!command.empty() && command.front() == "--")
        command.erase(command.begin());
    else if (!command.empty() && command.front().rfind('-', 0) == 0)
        return fail(fmt::format("unknown option {} (see --help)", command.front()));
    // Large answers (a 10,000-job listing is a few MB of text) reuse the
    // heap instead of fresh pages each time: glibc would return the freed
    // top of the heap to the kernel and fault it back in on the next
    // request, which on a VM costs more than building the text.
    mallopt(M_TRIM_THRESHOLD, 16 << 20);
    mallopt(M_MMAP_THRESHOLD, 16 << 20);
    become_init_if_pid1();
    follow_starter();
    std::signal(SIGPIPE, SIG_IGN);
    // SIGUSR1 and SIGUSR2 never end a broker (instances.md §4): held from
    // here until the relay takes them, so one sent while the instance
    // starts waits for it (children start with nothing blocked).
    sigset_t usr;
    sigemptyset(&usr);
    sigaddset(&usr, SIGUSR1);
    sigaddset(&usr, SIGUSR2);
    sigprocmask(SIG_BLOCK, &usr, nullptr);
    if (rank >= 0)
        options.rank = static_cast<uint32_t>(rank);
    if (options.hostname.empty())
        options.hostname = this_hostname();
    auto level = log::parse_level(level_text);
    if (!level)
        return fail(level.error().message);

    if (batch && !nested)
        return fail("--batch needs --nested");
    auto relay_to = SignalRelay::parse(signal_to);
    if (!relay_to)
        return fail(relay_to.error().message);
    if (nested && !options.config_path.empty())
        return fail("--nested takes no --config: it learns its instance through PMI");
    // A nested broker keeps the job's PMI open until it runs: a failure
    // before then aborts the job with its reason (PMI-1 abort), instead of
    // leaving the other brokers waiting for this one.
    std::optional<PmiClient> pmi;
    auto stop = [&pmi](const std::string& message) {
        if (pmi)
            pmi->abort(1, "banyan-broker: " + message);
        return fail(message);
    };
    auto boot = nested ? nested_bootstrap(options, batch, command, pmi) : make_bootstrap(options);
    if (!boot)
        return stop(boot.error().message);
    // A stop (systemctl stop or restart, a pod's end) leaves this broker
    // alone and keeps its jobs for when it is back (overlay.md §9), unless
    // broker.stop-keeps-jobs is false. Instances that are one piece of work
    // end theirs: a test instance never outlives its starter
    // (follow_starter), nor a nested one its job, nor a batch one COMMAND.
    bool keep_jobs_on_signal = boot->stop_keeps_jobs && !nested && command.empty() && !std::getenv("BANYAN_START_PID");
#ifdef BANYAN_PROTOCOL_OVERRIDE
    // banyan-broker-previous (a test's broker of the protocol before; it is
    // never installed).
    boot->protocol = BANYAN_PROTOCOL_OVERRIDE;
#endif
    if (boot->rundir.empty())
        boot->rundir = default_rundir(boot->rank);
    // Both hold what the broker trusts when it reads it back (the socket it
    // serves, the job database): no other user may own or write them.
    if (auto r = make_private_dir(boot->rundir, 0700); !r)
        return stop("rundir " + r.error().message);
    if (boot->statedir.empty())
        boot->statedir = boot->rundir + "/state";
    if (boot->rank == 0)
        if (auto r = make_private_dir(boot->statedir, 0700); !r)
            return stop("statedir " + r.error().message);
    log::configure({.program = "broker", .rank = boot->rank, .level = *level});

    Reactor reactor;
    Broker broker(reactor, std::move(*boot));
    register_builtin_services(broker);
    auto resources = ResourceService::start(broker);
    if (!resources)
        return stop(resources.error().message);
    auto scheduler = SchedService::start(broker);
    if (!scheduler)
        return stop(scheduler.error().message);
    // Before the job manager: the scheduler plans the kept reservations
    // before it hears of any job.
    auto reservations = ReservationService::start(broker);
    if (!reservations)
        return stop(reservations.error().message);
    auto exec = ExecService::start(broker);
    if (!exec)
        return stop(exec.error().message);
    // Before the job manager, which sends it records from its start on.
    auto accounting = AccountingService::start(broker);
    if (!accounting)
        return stop(accounting.error().message);
    auto job_manager = JobManager::start(broker);
    if (!job_manager)
        return stop(job_manager.error().message);
    auto http = HttpService::start(broker);
    if (!http)
        return stop(http.error().message);
    auto initial_program = InitialProgram::start(broker, std::move(command), marker_dir);
    if (!initial_program)
        return stop(initial_program.error().message);
    if (auto r = broker.start(); !r)
        return stop(r.error().message);
    if (pmi) {
        if (auto r = pmi->finalize(); !r)
            return stop(r.error().message);
        pmi.reset();
    }
    // Under systemd (Type=notify): ready once this broker serves its
    // socket and, below rank 0, has joined its parent. Nothing without
    // $NOTIFY_SOCKET.
    if (broker.bootstrap().rank == 0)
        notify_service_manager("READY=1\nSTATUS=rank 0: serving; waiting for the other ranks");
    broker.when_running([&broker] {
        notify_service_manager(
            fmt::format("READY=1\nSTATUS=rank {} of {}: running", broker.bootstrap().rank, broker.bootstrap().size));
    });

    int signals_seen = 0;
    SignalWatcher signals(reactor, {SIGTERM, SIGINT}, [&](int signo) {
        if (++signals_seen > 1 || broker.state() == Broker::State::shutdown) {
            log::warning("broker", "signal {} again: exiting now", signo);
            reactor.stop();
        } else if (keep_jobs_on_signal) {
            broker.leave(true);
        } else if (broker.bootstrap().rank == 0) {
            broker.begin_shutdown(fmt::format("signal {}", signo));
        } else {
            broker.leave(false);
        }
    });
    bool relays = nested && broker.bootstrap().rank == 0;
    SignalRelay relay(broker, **initial_program, relays ? *relay_to : SignalRelay::To::nowhere);
    sigprocmask(SIG_UNBLOCK, &usr, nullptr);
    reactor.run();
    notify_service_manager("STOPPING=1");
    (*initial_program)->finish();
    log::debug("broker", "exiting with status {}", (*initial_program)->exit_code());
    return (*initial_program)->exit_code();
}
