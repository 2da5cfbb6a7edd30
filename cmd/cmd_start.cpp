// banyan start: start an instance. `--test-size=N` starts N brokers on this
// machine with a generated certificate and ipc links, runs COMMAND (default:
// a shell) once the instance is up, then shuts the instance down and exits
// with COMMAND's status. `--config FILE` starts this machine's broker of a
// configured cluster (it becomes that broker); with COMMAND, rank 0 runs it
// once the instance runs and the whole instance then exits (batch mode).
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include <linux/magic.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "cmd/cli_util.hpp"
#include "core/curve_cert.hpp"
#include "core/fork_sibling.hpp"
#include "core/programs.hpp"
#include "core/reactor.hpp"
#include "core/unique_fd.hpp"
#include "core/unix_socket.hpp"

namespace banyan::cli {
namespace {

struct StartOptions {
    int test_size = 0;
    std::string config;
    std::vector<std::string> settings;
    std::string log_level;
    int64_t rank = -1;
    std::string rundir;
    std::string statedir;
    double wait_timeout = 120;
    std::string marker_dir;
    std::vector<std::string> command;
};

// Becomes the broker of a configured cluster.
int exec_configured_broker(const StartOptions& o) {
    std::vector<std::string> args = {program_path("banyan-broker"), "--config", o.config};
    for (const auto& s : o.settings)
        args.insert(args.end(), {"--setattr", s});
    if (o.rank >= 0)
        args.insert(args.end(), {"--rank", std::to_string(o.rank)});
    if (!o.rundir.empty())
        args.insert(args.end(), {"--rundir", o.rundir});
    if (!o.statedir.empty())
        args.insert(args.end(), {"--statedir", o.statedir});
    if (!o.log_level.empty())
        args.insert(args.end(), {"--log-level", o.log_level});
    if (!o.marker_dir.empty())
        args.insert(args.end(), {"--marker-dir", o.marker_dir});
    if (!o.command.empty()) {
        args.push_back("--");
        args.insert(args.end(), o.command.begin(), o.command.end());
    }
    std::vector<char*> argv;
    for (auto& a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    fail(fmt::format("{}: {}", args[0], std::strerror(errno)));
}

// Where a test instance's directory goes: /dev/shm when it is a tmpfs this
// user may write, as an installed broker's run directory is /run/banyan
// (a job's directory is made and removed per job: on ext4 that was a fifth
// of a broker's CPU in a burst of small jobs); else /tmp.
std::string runtime_base() {
    struct statfs fs {};
    if (statfs("/dev/shm", &fs) == 0 && fs.f_type == TMPFS_MAGIC && access("/dev/shm", W_OK | X_OK) == 0)
        return "/dev/shm";
    return "/tmp";
}

// A test instance: its directory, brokers, and clean-up on every path.
class TestInstance {
  public:
    TestInstance(Reactor& reactor, const StartOptions& o) : reactor_(reactor), options_(o) {}
    ~TestInstance() {
        brokers_.clear();  // kills any broker still running
        if (forker_pid_ > 0) {
            forker_socket_.reset();
            kill(forker_pid_, SIGKILL);
            waitpid(forker_pid_, nullptr, 0);
        }
        for (const std::string& dir : {dir_, state_dir_})
            if (!dir.empty()) {
                std::error_code ec;
                std::filesystem::remove_all(dir, ec);
            }
    }

    void launch() {
        std::string base = runtime_base();
        std::string tmpl = base + "/banyan-XXXXXX";
        if (!mkdtemp(tmpl.data()))
            fail(fmt::format("cannot make a directory in {}: {}", base, std::strerror(errno)));
        dir_ = tmpl;
        // Rank 0's database stays on disk, as /var/lib/banyan does: its
        // commits cost what they cost there.
        if (options_.statedir.empty() && base != "/tmp") {
            char state[] = "/tmp/banyan-state-XXXXXX";
            if (!mkdtemp(state))
                fail(fmt::format("cannot make a directory in /tmp: {}", std::strerror(errno)));
            state_dir_ = state;
        }
        CurveCert cert = must(CurveCert::generate());
        must(cert.save(dir_ + "/curve.cert"));
        std::ofstream toml(dir_ + "/instance.toml");
        toml << fmt::format(
            "# Written by banyan start --test-size={}\n"
            "[bootstrap]\nsize = {}\nbind = \"ipc://{}/tbon-%r\"\nconnect = \"ipc://{}/tbon-%r\"\n"
            "curve_cert = \"{}/curve.cert\"\n",
            options_.test_size, options_.test_size, dir_, dir_, dir_);
        // Every broker is on this machine: it is discovered once, by a
        // broker (the CLI does not load hwloc), and each loads the result
        // instead of discovering it again. Not where hwloc is told to
        // describe another machine (the brokers take it as given).
        bool this_machine = !std::getenv("HWLOC_SYNTHETIC") && !std::getenv("HWLOC_XMLFILE");
        if (this_machine && export_topology(dir_ + "/topology.xml"))
            toml << fmt::format("[resource]\ntopology-cache = \"{}/topology.xml\"\n", dir_);
        toml.close();
        setenv("BANYAN_START_PID", std::to_string(getpid()).c_str(), 1);
        std::vector<std::vector<std::string>> argvs;
        for (int rank = 0; rank < options_.test_size; rank++)
            argvs.push_back(broker_argv(rank));
        int rank = fork_brokers(argvs);
        for (; rank < options_.test_size; rank++)
            brokers_.push_back(
                must(Subprocess::spawn(reactor_, {.argv = argvs[static_cast<size_t>(rank)]}, on_exit(rank))));
    }

    // The brokers forked, in rank order, by one `banyan-broker
    // --fork-brokers` (overlay.md §12): each skips loading and linking its
    // thirty libraries, most of a broker's start-up on one host. Returns
    // how many were started; those after are executed each (said once,
    // unless clone3 is refused here: then no broker is forked).
    int fork_brokers(const std::vector<std::vector<std::string>>& argvs) {
        if (!fork_sibling_supported())
            return 0;
        size_t longest = 0;
        for (const auto& argv : argvs) {
            size_t bytes = 0;
            for (const auto& a : argv)
                bytes += a.size() + 1;
            longest = std::max(longest, bytes);
        }
        int pair[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
            fmt::print(stderr, "banyan start: each broker is executed: socketpair: {}\n", std::strerror(errno));
            return 0;
        }
        UniqueFd theirs(pair[1]);
        forker_socket_ = UniqueFd(pair[0]);
        timeval limit{.tv_sec = 30, .tv_usec = 0};
        setsockopt(forker_socket_.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
        // The padding makes room for the longest broker's arguments, which
        // each forked broker writes over its copy of these.
        auto forker =
            Subprocess::spawn(reactor_,
                              {.argv = {program_path("banyan-broker"), "--fork-brokers", std::string(longest, ' ')},
                               .env = environment_binding_now(),
                               .fd3 = theirs.get()},
                              [](int) {});
        theirs.reset();
        if (!forker) {
            fmt::print(stderr, "banyan start: each broker is executed: {}\n", forker.error().message);
            return 0;
        }
        // Never reaped before its brokers end: its pid, which their C
        // library holds as their first thread's id, stays taken (§12).
        forker_pid_ = (*forker)->pid();
        (*forker)->disown();
        int rank = 0;
        for (; rank < static_cast<int>(argvs.size()); rank++) {
            std::string request;
            for (const auto& a : argvs[static_cast<size_t>(rank)])
                request.append(a).push_back('\0');
            int32_t answer = 0;
            std::vector<UniqueFd> fds;
            auto sent = send_with_fds(forker_socket_.get(), request, {});
            auto got =
                sent ? receive_with_fds(forker_socket_.get(), {reinterpret_cast<char*>(&answer), sizeof answer}, fds)
                     : Result<size_t>(sent.error());
            if (got && *got == sizeof answer && answer > 0) {
                pid_t pid = answer;
                // Our child, not reaped: its pid is its own until we wait.
                int pidfd = fds.empty() ? static_cast<int>(syscall(SYS_pidfd_open, pid, 0)) : fds[0].release();
                setpgid(pid, pid);  // as the broker does itself: whichever comes first
                brokers_.push_back(Subprocess::adopt(reactor_, pid, pidfd, true, on_exit(rank)));
                continue;
            }
            // Not sent, or refused: nothing was forked for this rank. Or, at
            // the first rank, a forker that ended unasked (an older broker
            // without --fork-brokers). The rest are executed. Anything else
            // (no answer, a malformed one) may leave a broker running unknown
            // to us: the start fails (ours die with us).
            bool refused = got && *got == sizeof answer && answer < 0;
            bool ended = !sent || (rank == 0 && got && *got == 0);
            if (!refused && !ended)
                fail(fmt::format("the broker forker failed at rank {}: {}", rank,
                                 !got ? got.error().message : "a malformed answer"));
            if (rank == 0) {
                // Nothing forked: the forker goes now.
                forker_socket_.reset();
                waitpid(forker_pid_, nullptr, 0);
                forker_pid_ = -1;
                if (refused && (answer == -ENOSYS || answer == -EPERM))
                    return 0;  // clone3 is not allowed here (a container's seccomp filter)
            }
            fmt::print(stderr, "banyan start: brokers from rank {} on are executed each: {}\n", rank,
                       refused ? std::strerror(-answer) : "banyan-broker --fork-brokers ended");
            return rank;
        }
        return rank;
    }

    // `banyan-broker --export-topology FILE`, waited for; false (said on
    // stderr) when it failed: each broker then discovers the machine.
    bool export_topology(const std::string& file) {
        std::optional<int> status;
        auto proc = Subprocess::spawn(reactor_, {.argv = {program_path("banyan-broker"), "--export-topology", file}},
                                      [&status](int s) { status = s; });
        if (proc)
            wait_until([&status] { return status.has_value(); }, 60);
        if (proc && status && *status == 0)
            return true;
        fmt::print(stderr, "banyan start: each broker discovers this machine: {}\n",
                   !proc ? proc.error().message : "banyan-broker --export-topology failed");
        return false;
    }

    std::vector<std::string> broker_argv(int rank) {
        std::string rundir = fmt::format("{}/rank-{}", dir_, rank);
        // 0755 whatever the umask: the broker refuses a group-writable one;
        // guests reach the socket once the owner opens the instance directory.
        mkdir(rundir.c_str(), 0755);
        std::vector<std::string> argv = {program_path("banyan-broker"),
                                         "--config",
                                         dir_ + "/instance.toml",
                                         "--rank",
                                         std::to_string(rank),
                                         "--rundir",
                                         rundir,
                                         "--log-level",
                                         options_.log_level.empty() ? "warning" : options_.log_level};
        for (const auto& s : options_.settings)
            argv.insert(argv.end(), {"--setattr", s});
        const std::string& statedir = options_.statedir.empty() ? state_dir_ : options_.statedir;
        if (rank == 0 && !statedir.empty())
            argv.insert(argv.end(), {"--statedir", statedir});
        return argv;
    }

    std::function<void(int)> on_exit(int rank) {
        return [this, rank](int status) {
            exited_++;
            if (shutting_down_ || shut_down_outside_)
                return;
            // A follower that ends well left cleanly (a shutdown takes the
            // leaves first, or it was told to go): nothing to say. Rank 0
            // ending well while COMMAND runs: `banyan shutdown` from
            // outside. Said once, and COMMAND ends (its BANYAN_URI is dead).
            if (exit_code_from_wait_status(status) == 0 && rank != 0)
                return;
            if (exit_code_from_wait_status(status) == 0) {
                shut_down_outside_ = true;
                fmt::print(stderr, "banyan start: the instance was shut down (banyan shutdown); ending the command\n");
                if (on_shut_down_outside)
                    on_shut_down_outside();
                return;
            }
            fmt::print(stderr, "banyan start: broker rank {} exited early (status {})\n", rank,
                       exit_code_from_wait_status(status));
        };
    }

    std::string uri() const { return fmt::format("local://{}/rank-0/local.sock", dir_); }

    // Runs the loop until `done()` or `seconds` pass; true if done.
    bool wait_until(const std::function<bool()>& done, double seconds) {
        auto deadline = Clock::now() + std::chrono::duration_cast<Duration>(std::chrono::duration<double>(seconds));
        while (!done()) {
            if (Clock::now() >= deadline)
                return false;
            reactor_.run_for(std::chrono::milliseconds(5));
        }
        return true;
    }

    // Waits for rank 0's socket, then for the quorum.
    Client connect_when_ready() {
        std::optional<Client> client;
        std::string last_error;
        bool connected = wait_until(
            [&] {
                if (exited_ > 0)
                    fail("a broker failed to start (see its message above)");
                auto c = Client::connect(uri());
                if (!c) {
                    last_error = c.error().message;
                    return false;
                }
                client.emplace(std::move(*c));
                return true;
            },
            options_.wait_timeout);
        if (!connected)
            fail(fmt::format("rank 0 did not come up within {}s: {}", options_.wait_timeout, last_error));
        auto ready = client->rpc("broker.ready", nlohmann::json::object(), 0,
                                 std::chrono::milliseconds(static_cast<int64_t>(options_.wait_timeout * 1000)));
        if (!ready)
            fail(fmt::format("instance did not reach its quorum: {}", ready.error().message));
        return std::move(*client);
    }

    // Asks rank 0 to shut the tree down and waits for every broker to exit.
    // Once rank 0 is gone, a broker still running was cut off from the tree
    // (its parent died): it gets a short grace, then SIGTERM, then SIGKILL.
    void shutdown(Client& client) {
        shutting_down_ = true;
        (void)client.rpc("broker.shutdown", nlohmann::json::object(), 0, std::chrono::seconds(5));
        size_t n = brokers_.size();
        wait_until([&] { return !brokers_[0]->running(); }, 60);
        if (wait_until([&] { return exited_ == n; }, 2))
            return;
        for (auto& b : brokers_)
            if (b->running())
                (void)b->signal(SIGTERM);
        if (!wait_until([&] { return exited_ == n; }, 5))
            fmt::print(stderr, "banyan start: {} brokers did not exit; killing them\n", n - exited_);
    }

  private:
    Reactor& reactor_;
    const StartOptions& options_;
    std::string dir_;
    std::string state_dir_;  // rank 0's database when dir_ is on tmpfs and no --statedir was given
    std::vector<std::unique_ptr<Subprocess>> brokers_;
    // The forking broker (disowned, reaped last) and its socket: kept while
    // brokers it forked run (overlay.md §12).
    pid_t forker_pid_ = -1;
    UniqueFd forker_socket_;
    size_t exited_ = 0;
    bool shutting_down_ = false;
    bool shut_down_outside_ = false;

  public:
    // Runs when the instance is shut down from outside while COMMAND runs.
    std::function<void()> on_shut_down_outside;
};

int run_test_instance(const StartOptions& o) {
    Reactor reactor;
    TestInstance instance(reactor, o);
    instance.launch();
    Client client = instance.connect_when_ready();

    std::vector<std::string> command = o.command;
    command = command_or_shell(std::move(command));
    setenv("BANYAN_URI", instance.uri().c_str(), 1);
    // COMMAND finds this very `banyan` first, as it would inside `flux start`.
    std::error_code ec;
    auto bindir = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path().string();
    const char* path = std::getenv("PATH");
    if (!ec)
        setenv("PATH", (bindir + ":" + (path ? path : "/usr/bin:/bin")).c_str(), 1);
    unsetenv("BANYAN_START_PID");
    int status = -1;
    bool done = false;
    // The command shares our terminal and process group (an interactive
    // shell needs both); we ignore the terminal's SIGINT and SIGQUIT meanwhile.
    std::signal(SIGINT, SIG_IGN);
    std::signal(SIGQUIT, SIG_IGN);
    auto proc =
        Subprocess::spawn(reactor, {.argv = command, .new_process_group = false, .keep_descriptors = true}, [&](int s) {
            status = s;
            done = true;
            reactor.stop();
        });
    int exit_code = 127;
    if (!proc) {
        fmt::print(stderr, "banyan start: {}\n", proc.error().message);
    } else {
        std::optional<SignalWatcher> term(std::in_place, reactor, std::vector<int>{SIGTERM},
                                          [&](int) { (void)(*proc)->signal(SIGTERM); });
        // As a terminal that closes: an interactive shell exits on SIGHUP.
        instance.on_shut_down_outside = [&] { (void)(*proc)->signal(SIGHUP); };
        // Woken by the command's exit, not polling: a command may run for
        // hours, and every wake costs a CPU the jobs would use.
        while (!done)
            reactor.run();
        exit_code = exit_code_from_wait_status(status);
    }
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGQUIT, SIG_DFL);
    instance.shutdown(client);
    return exit_code;
}

}  // namespace

void add_start(CLI::App& app, int& exit_code) {
    static StartOptions o;
    auto* cmd = app.add_subcommand("start",
                                   "Start an instance: N local brokers (--test-size) or this node's "
                                   "broker of a configured cluster (--config)");
    cmd->add_option("-s,--test-size", o.test_size, "start N brokers on this machine")->check(CLI::Range(1, 4096));
    cmd->add_option("-c,--config", o.config, "start this node's broker from a cluster config file");
    cmd->add_option("-S,--setattr", o.settings, "override a config key: KEY=VALUE (repeatable)")
        ->allow_extra_args(false);
    cmd->add_option("-r,--rank", o.rank, "with --config: this broker's rank");
    cmd->add_option("--rundir", o.rundir, "with --config: directory for the local socket");
    cmd->add_option("--statedir", o.statedir,
                    "rank 0's database directory; kept across restarts "
                    "(test instances: a temporary one)");
    cmd->add_option("--log-level", o.log_level, "brokers' log level (test instances: warning)");
    cmd->add_option("--wait-timeout", o.wait_timeout, "seconds to wait for the instance to come up (default 120)");
    cmd->add_option("--marker-dir", o.marker_dir,
                    "with --config, at rank 0: write banyan.start here once the instance runs, "
                    "banyan.stop (the exit status) when it ends");
    // Everything from the first argument that is not an option on is COMMAND,
    // whose own options (sh -c ...) are not ours.
    cmd->prefix_command();
    cmd->footer(
        "COMMAND...: with --test-size, run this instead of a shell, then shut the instance down; "
        "with --config, rank 0 runs it once the instance runs, then every broker exits");
    cmd->callback([cmd, &exit_code] {
        o.command = command_of(cmd);
        if ((o.test_size > 0) == !o.config.empty())
            fail("give exactly one of --test-size=N and --config=FILE");
        if (!o.config.empty()) {
            exit_code = exec_configured_broker(o);
            return;
        }
        if (!o.marker_dir.empty())
            fail("--marker-dir goes with --config");
        exit_code = run_test_instance(o);
    });
}

}  // namespace banyan::cli
