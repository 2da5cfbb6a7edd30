#include <catch2/catch.hpp>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <thread>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/reactor.hpp"

using namespace banyan;
using namespace std::chrono_literals;

TEST_CASE("timers fire once, repeat, and stay silent once cancelled", "[reactor]") {
    Reactor reactor;
    int once = 0;
    int repeats = 0;
    int cancelled = 0;
    Timer t1(reactor);
    Timer t2(reactor);
    Timer t3(reactor);
    t1.start(1ms, [&] { once++; });
    t2.start_repeating(2ms, [&] {
        if (++repeats == 3) {
            t2.cancel();
            reactor.stop();
        }
    });
    t3.start(1ms, [&] { cancelled++; });
    t3.cancel();
    CHECK(!t3.active());
    reactor.run_for(2s);
    CHECK(once == 1);
    CHECK(repeats == 3);
    CHECK(cancelled == 0);
}

TEST_CASE("a timer destroyed before it fires never calls back", "[reactor]") {
    Reactor reactor;
    int fired = 0;
    {
        Timer t(reactor);
        t.start(1ms, [&] { fired++; });
    }
    reactor.run_for(20ms);
    CHECK(fired == 0);
}

TEST_CASE("fd watcher reports readable data", "[reactor]") {
    Reactor reactor;
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    std::string got;
    FdWatcher w(reactor, fds[0], FdWatcher::Event::readable, [&] {
        char buf[16];
        ssize_t n = read(fds[0], buf, sizeof buf);
        got.append(buf, static_cast<size_t>(n));
        if (got == "hello")
            reactor.stop();
    });
    Timer t(reactor);
    t.start(1ms, [&] { CHECK(write(fds[1], "hello", 5) == 5); });
    reactor.run_for(2s);
    CHECK(got == "hello");
    close(fds[0]);
    close(fds[1]);
}

TEST_CASE("signal watcher delivers signals on the loop", "[reactor]") {
    Reactor reactor;
    int seen = 0;
    SignalWatcher w(reactor, {SIGUSR1}, [&](int signo) {
        seen = signo;
        reactor.stop();
    });
    reactor.post([] { kill(getpid(), SIGUSR1); });
    reactor.run_for(2s);
    CHECK(seen == SIGUSR1);
}

TEST_CASE("subprocess reports exit codes and signals", "[reactor]") {
    Reactor reactor;
    int status = -1;
    auto p = Subprocess::spawn(reactor, {.argv = {"sh", "-c", "exit 7"}}, [&](int s) {
        status = s;
        reactor.stop();
    });
    REQUIRE(p.ok());
    reactor.run_for(5s);
    CHECK(exit_code_from_wait_status(status) == 7);
    CHECK(!(*p)->running());

    auto sleeper = Subprocess::spawn(reactor, {.argv = {"sleep", "30"}}, [&](int s) {
        status = s;
        reactor.stop();
    });
    REQUIRE(sleeper.ok());
    REQUIRE((*sleeper)->signal(SIGTERM).ok());
    reactor.run_for(5s);
    CHECK(exit_code_from_wait_status(status) == 128 + SIGTERM);
}

TEST_CASE("subprocess applies env, cwd and stdout redirection", "[reactor]") {
    Reactor reactor;
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    auto p = Subprocess::spawn(reactor,
                               {.argv = {"sh", "-c", "echo $GREETING; pwd"},
                                .env = std::vector<std::string>{"GREETING=hi", "PATH=/usr/bin:/bin"},
                                .cwd = "/tmp",
                                .stdout_fd = fds[1]},
                               [&](int) { reactor.stop(); });
    REQUIRE(p.ok());
    close(fds[1]);
    reactor.run_for(5s);
    char buf[64] = {};
    ssize_t n = read(fds[0], buf, sizeof buf - 1);
    close(fds[0]);
    CHECK(std::string(buf, static_cast<size_t>(n)) == "hi\n/tmp\n");
}

TEST_CASE("subprocess starts with default signal dispositions and an empty mask", "[reactor]") {
    // What the parent ignores or blocks must not reach the child: a shell
    // started with USR1 ignored could not be killed by it.
    Reactor reactor;
    auto old = std::signal(SIGUSR1, SIG_IGN);
    sigset_t usr2, saved;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &usr2, &saved);
    int status = -1;
    auto p = Subprocess::spawn(
        reactor, {.argv = {"sh", "-c", "grep -q '^SigBlk:[[:space:]0]*$' /proc/self/status && kill -USR1 $$; exit 3"}},
        [&](int s) {
            status = s;
            reactor.stop();
        });
    pthread_sigmask(SIG_SETMASK, &saved, nullptr);
    std::signal(SIGUSR1, old);
    REQUIRE(p.ok());
    reactor.run_for(5s);
    CHECK(exit_code_from_wait_status(status) == 128 + SIGUSR1);
}

TEST_CASE("subprocess names a program that cannot run", "[reactor]") {
    Reactor reactor;
    auto p = Subprocess::spawn(reactor, {.argv = {"/nonexistent/prog"}}, [](int) {});
    REQUIRE(!p.ok());
    CHECK(p.error().code == ENOENT);
    CHECK(p.error().message == "/nonexistent/prog: No such file or directory");
    CHECK(!Subprocess::spawn(reactor, {.argv = {}}, [](int) {}).ok());
}

TEST_CASE("destroying a running subprocess kills its whole process group", "[reactor]") {
    Reactor reactor;
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    pid_t grandchild = 0;
    {
        // The child forks a grandchild that would outlive it, prints its pid.
        auto p = Subprocess::spawn(reactor, {.argv = {"sh", "-c", "sleep 30 & echo $!; wait"}, .stdout_fd = fds[1]},
                                   [](int) {});
        REQUIRE(p.ok());
        close(fds[1]);
        char buf[32] = {};
        REQUIRE(read(fds[0], buf, sizeof buf - 1) > 0);
        grandchild = std::atoi(buf);
        REQUIRE(grandchild > 0);
    }
    close(fds[0]);
    // The grandchild was in the group: it is gone (or a zombie of init).
    bool gone = false;
    for (int i = 0; i < 100 && !gone; i++) {
        std::string stat_path = "/proc/" + std::to_string(grandchild) + "/stat";
        FILE* f = fopen(stat_path.c_str(), "r");
        if (!f) {
            gone = true;
            break;
        }
        char state = 0;
        int ignored_pid = 0;
        char comm[64];
        if (fscanf(f, "%d %63s %c", &ignored_pid, comm, &state) == 3 && state == 'Z')
            gone = true;
        fclose(f);
        usleep(10000);
    }
    CHECK(gone);
}

TEST_CASE("a callback that throws is logged and the loop goes on", "[reactor]") {
    Reactor reactor;
    int after = 0;
    Timer thrower(reactor), repeating(reactor), later(reactor);
    thrower.start(1ms, [] { throw std::runtime_error("timer fault"); });
    // A repeating timer that throws keeps repeating.
    int repeats = 0;
    repeating.start_repeating(1ms, [&] {
        if (++repeats == 3)
            repeating.cancel();
        throw std::logic_error("repeat fault");
    });
    reactor.post([] { throw 42; });
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    REQUIRE(write(fds[1], "x", 1) == 1);
    bool read_once = false;
    FdWatcher watcher(reactor, fds[0], FdWatcher::Event::readable, [&] {
        char c;
        (void)read(fds[0], &c, 1);
        read_once = true;
        throw std::runtime_error("fd fault");
    });
    later.start(20ms, [&] {
        after++;
        reactor.stop();
    });
    reactor.run_for(2s);
    CHECK(after == 1);
    CHECK(repeats == 3);
    CHECK(read_once);
    watcher.stop();
    close(fds[0]);
    close(fds[1]);
}

TEST_CASE("a subprocess inherits no descriptor but 0-2 and fd3, even one without close-on-exec", "[reactor]") {
    Reactor reactor;
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int leaked = fcntl(devnull, F_DUPFD, 10);  // no close-on-exec, on purpose
    close(devnull);
    REQUIRE(leaked >= 10);
    int placed = open("/dev/null", O_RDONLY | O_CLOEXEC);
    // spawn returns once the program runs: its descriptors are read here.
    auto p = Subprocess::spawn(reactor, {.argv = {"sleep", "30"}, .fd3 = placed}, [&](int) { reactor.stop(); });
    REQUIRE(p.ok());
    close(placed);
    close(leaked);
    auto open_fds = [pid = (*p)->pid()] {
        std::vector<int> fds;
        if (DIR* dir = opendir(fmt::format("/proc/{}/fd", pid).c_str())) {
            while (dirent* e = readdir(dir))
                if (e->d_name[0] != '.')
                    fds.push_back(std::atoi(e->d_name));
            closedir(dir);
        }
        std::sort(fds.begin(), fds.end());
        return fds;
    };
    // The program's dynamic loader opens its libraries on the next free
    // descriptor (4) for a moment as it starts: what was inherited is what
    // stays. A leaked descriptor never goes; the loader's goes at once.
    std::vector<int> fds = open_fds();
    for (int i = 0; i < 500 && fds != std::vector<int>{0, 1, 2, 3}; i++) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        fds = open_fds();
    }
    CHECK(fds == std::vector<int>{0, 1, 2, 3});
}
