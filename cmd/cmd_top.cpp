// banyan top: the instance at a glance, refreshed in place (like flux top
// and htop): the brokers, the cores in use, the queue and the running jobs.
// q quits. Not on a terminal, or with -n N: N frames, one after another.
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <csignal>
#include <ctime>

#include <fmt/format.h>

#include "cmd/cli_util.hpp"
#include "core/idset.hpp"
#include "core/json_field.hpp"

namespace banyan::cli {
namespace {

volatile std::sig_atomic_t stop_signal = 0;

uint64_t count_of(const nlohmann::json& j, std::initializer_list<std::string_view> path, std::string_view key) {
    return json_field<uint64_t>(json_object_at(j, path), key, 0, key).value_or(0);
}

// One frame: a summary, then the job listing cut to `rows` lines.
std::string frame(Client& client, bool all_users, size_t rows) {
    auto overlay = must(client.rpc("overlay.status", nlohmann::json::object(), 0));
    auto resources = must(client.rpc("resource.list", nlohmann::json::object(), 0));
    auto size = json_field<uint32_t>(overlay, "size", 0, "overlay").value_or(0);
    auto online = IdSet::parse(json_field<std::string>(overlay, "online", "", "overlay").value_or(""));
    uint64_t used = count_of(resources, {"allocated"}, "ncores");
    uint64_t cores = used + count_of(resources, {"free"}, "ncores") + count_of(resources, {"down"}, "ncores");
    uint64_t gpus_used = count_of(resources, {"allocated"}, "ngpus");
    uint64_t gpus = gpus_used + count_of(resources, {"free"}, "ngpus") + count_of(resources, {"down"}, "ngpus");
    std::time_t now = std::time(nullptr);
    char clock[16];
    std::strftime(clock, sizeof clock, "%H:%M:%S", std::localtime(&now));
    std::string jobs = active_jobs_table(client, all_users, 0);
    size_t lines = static_cast<size_t>(std::count(jobs.begin(), jobs.end(), '\n'));
    size_t pending = list_jobs(client, {{"all_users", all_users}, {"states", {"depend", "priority", "sched"}}}).size();
    std::string out =
        fmt::format("banyan top - {}   brokers {}/{} online   cores {}/{} in use{}   jobs {} ({} pending)\n\n", clock,
                    online ? online->count() : 0, size, used, cores,
                    gpus ? fmt::format("   GPUs {}/{}", gpus_used, gpus) : "", lines > 0 ? lines - 1 : 0, pending);
    // The listing, cut to the terminal.
    size_t start = 0;
    for (size_t i = 0; i < rows && start < jobs.size(); i++) {
        size_t end = jobs.find('\n', start);
        out += jobs.substr(start, end - start + 1);
        start = end + 1;
    }
    if (start < jobs.size())
        out += fmt::format("... {} more\n", lines - rows);
    return out;
}

}  // namespace

void add_top(CLI::App& app, int& exit_code) {
    static bool all_users = false;
    static double delay = 2;
    static int64_t frames = 0;
    auto* cmd = app.add_subcommand("top", "The instance at a glance, refreshed in place (q quits)");
    cmd->add_flag("-A", all_users, "every user's jobs (instance owner)");
    cmd->add_option("-d,--delay", delay, "seconds between refreshes (default 2)")->check(CLI::Range(0.1, 3600.0));
    cmd->add_option("-n,--iterations", frames, "print N frames and exit (the default when not on a terminal: 1)")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
    cmd->callback([&exit_code] {
        Client client = connect_to_instance();
        bool tty = isatty(STDOUT_FILENO) && isatty(STDIN_FILENO) && frames == 0;
        if (!tty) {
            for (int64_t i = 0; i < std::max<int64_t>(frames, 1); i++) {
                if (i > 0)
                    usleep(static_cast<useconds_t>(delay * 1e6));
                fmt::print("{}\n", frame(client, all_users, SIZE_MAX));
                std::fflush(stdout);
            }
            exit_code = 0;
            return;
        }
        // Raw keys (no echo, no line buffering) until we leave; the
        // terminal is put back however we leave.
        termios saved{};
        tcgetattr(STDIN_FILENO, &saved);
        termios raw = saved;
        raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
        tcsetattr(STDIN_FILENO, TCSANOW, &raw);
        struct Restore {
            termios t;
            ~Restore() {
                tcsetattr(STDIN_FILENO, TCSANOW, &t);
                fmt::print("\033[?25h\n");
            }
        } restore{saved};
        fmt::print("\033[?25l");  // no cursor while drawing
        // Ctrl-C, a closed terminal or a kill leave through the same door.
        for (int s : {SIGINT, SIGTERM, SIGHUP})
            std::signal(s, [](int signo) { stop_signal = signo; });
        while (!stop_signal) {
            winsize ws{};
            size_t rows = ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 4 ? ws.ws_row - 4 : 20;
            fmt::print("\033[H\033[2J{}", frame(client, all_users, rows));
            std::fflush(stdout);
            pollfd key{STDIN_FILENO, POLLIN, 0};
            if (poll(&key, 1, static_cast<int>(delay * 1000)) > 0 && !stop_signal) {
                char c = 0;
                if (read(STDIN_FILENO, &c, 1) <= 0 || c == 'q' || c == 'Q')
                    break;
            }
        }
        exit_code = 0;
    });
}

}  // namespace banyan::cli
