#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "broker/exec/job_cgroup.hpp"
#include "core/reactor.hpp"
#include "core/text_file.hpp"
#include "core/unique_fd.hpp"
#include "shell/binding.hpp"
#include "shell/pmix_barrier.hpp"
#include "shell/shell_job.hpp"
#include "shell/socket_relay.hpp"

using namespace banyan;

namespace {

nlohmann::json message(nlohmann::json options) {
    auto jobspec = nlohmann::json::parse(R"({"version":1,
        "resources":[{"type":"node","count":2,"with":[{"type":"slot","count":2,"label":"task",
                      "with":[{"type":"core","count":1}]}]}],
        "tasks":[{"command":["app","-x"],"slot":"task","count":{"per_slot":1}}],
        "attributes":{"system":{"duration":0,"cwd":"/work","environment":{"A":"1","BANYAN_JOB_ID":"old"}}}})");
    jobspec["attributes"]["system"]["shell"]["options"] = std::move(options);
    return {{"id", 58u},
            {"rank", 1u},
            {"uri", "local:///run/b/local.sock"},
            {"tmpdir", "/run/b/jobs/f21-1"},
            {"jobspec", jobspec},
            {"R", nlohmann::json::parse(R"({"version":1,"execution":{"R_lite":[{"rank":"0-1","children":
                  {"core":"2-3","gpu":"0-1"}}],"nodelist":["n[7-8]"],"starttime":0,"expiration":0}})")}};
}

}  // namespace

TEST_CASE("shell job: the first line, with defaults", "[shell]") {
    auto job = ShellJob::parse(message(nlohmann::json::object())).value();
    CHECK(job.local.first_task == 2);
    CHECK(job.local.ntasks == 2);
    CHECK(job.command == std::vector<std::string>{"app", "-x"});
    CHECK(job.environment == std::vector<std::string>{"A=1"});  // BANYAN_* are the shell's to set
    CHECK(job.cwd == "/work");
    CHECK(job.host_of(1) == "n8");
    CHECK(job.options.cpu_affinity == Affinity::on);
    CHECK(job.options.exit_timeout == 30.0);
    CHECK_FALSE(job.options.label);
    CHECK(expand_output_template("o.{{id}}.{{taskid}}.{{node}}", 58, 3, "n8") == "o.f21.3.n8");
}

TEST_CASE("shell job: options and their errors", "[shell]") {
    auto job = ShellJob::parse(message({{"cpu-affinity", "per-task"},
                                        {"gpu-affinity", "off"},
                                        {"exit-timeout", "none"},
                                        {"output", {{"label", true}, {"stdout", {{"path", "x"}}}}},
                                        {"stdin", "forward"},
                                        {"rlimit", {{"nofile", 1024}, {"core", "unlimited"}}}}))
                   .value();
    CHECK(job.options.cpu_affinity == Affinity::per_task);
    CHECK(job.options.gpu_affinity == Affinity::off);
    CHECK_FALSE(job.options.exit_timeout.has_value());
    CHECK(job.options.label);
    CHECK(job.options.stdout_path == "x");
    CHECK(job.options.forward_stdin);
    CHECK(job.options.rlimits.size() == 2);
    CHECK(ShellJob::parse(message({{"exit-timeout", "soon"}})).error().message ==
          R"(-o exit-timeout="soon": expected a duration like 30s, or none)");
    CHECK(ShellJob::parse(message({{"rlimit", {{"bogus", 1}}}})).error().message.starts_with("-o rlimit.bogus: unknown"));
    CHECK(ShellJob::parse(message({{"gpu-affinity", 3.5}})).ok());  // a number is on/off
    auto missing = message(nlohmann::json::object());
    missing["rank"] = 5u;
    CHECK(ShellJob::parse(missing).error().message == "R holds no resources on rank 5");
}

TEST_CASE("shell job: Slurm's variables and file names (-o slurm)", "[shell][slurm]") {
    auto msg = message({{"slurm", {{"ntasks", 3}, {"submit_dir", "/home/ann"}}}, {"output", {{"stdout", {{"path", "{{name}}-{{id.dec}}-{{user}}-{{array_id.dec}}_{{array_index}}"}}}}}});
    msg["jobspec"]["attributes"]["system"]["job"] = {{"name", "sim"}};
    auto job = ShellJob::parse(msg).value();
    CHECK(job.options.slurm);
    job.expand_job_templates("ann");
    CHECK(job.options.stdout_path == "sim-58-ann-58_4294967294");  // outside an array, as Slurm's %A_%a
    auto env = job.slurm_environment(3, 1, 2);
    auto has = [&](const std::string& kv) { return std::find(env.begin(), env.end(), kv) != env.end(); };
    CHECK(has("SLURM_JOB_ID=58"));
    CHECK(has("SLURM_JOB_NAME=sim"));
    CHECK(has("SLURM_NTASKS=3"));  // as the job asked (a batch job's own tasks are brokers)
    CHECK(has("SLURM_PROCID=3"));
    CHECK(has("SLURM_LOCALID=1"));
    CHECK(has("SLURM_NODEID=1"));
    CHECK(has("SLURMD_NODENAME=n8"));
    CHECK(has("SLURM_JOB_NODELIST=n[7-8]"));
    CHECK(has("SLURM_CPUS_PER_TASK=1"));
    CHECK(has("SLURM_CPUS_ON_NODE=2"));
    CHECK(has("SLURM_SUBMIT_DIR=/home/ann"));  // where sbatch ran, not the job's cwd (/work)
    // Open MPI takes SLURM_JOBID with SLURM_NODELIST for an srun launch.
    CHECK_FALSE(std::any_of(env.begin(), env.end(), [](const std::string& kv) {
        return kv.starts_with("SLURM_JOBID=") || kv.starts_with("SLURM_NODELIST=");
    }));
    CHECK(ShellJob::parse(message({{"slurm", "yes"}})).error().message.starts_with("-o slurm=\"yes\": expected"));
    auto plain = ShellJob::parse(message(nlohmann::json::object())).value();
    CHECK_FALSE(plain.options.slurm);
}

TEST_CASE("binding: on, per-task and off, for CPUs and GPUs", "[shell]") {
    std::vector<std::vector<int>> core_cpus{{0, 4}, {1, 5}, {2, 6}, {3, 7}};  // two hyperthreads a core
    IdSet cores = IdSet::parse("1-3").value(), gpus = IdSet::parse("0-1").value();
    auto on = task_bindings(core_cpus, cores, gpus, 2, Affinity::on, Affinity::on);
    CHECK(on[1].cpus == std::vector<int>{1, 5, 2, 6, 3, 7});
    CHECK(on[1].gpus == "0,1");
    auto per_task = task_bindings(core_cpus, cores, gpus, 2, Affinity::per_task, Affinity::per_task);
    CHECK(per_task[0].cpus == std::vector<int>{1, 5});
    CHECK(per_task[1].cpus == std::vector<int>{2, 6, 3, 7});
    CHECK(per_task[1].gpus == "1");
    auto crowded = task_bindings(core_cpus, cores, {}, 4, Affinity::per_task, Affinity::on);
    CHECK(crowded[3].cpus == std::vector<int>{1, 5});  // more tasks than cores: shared round robin
    CHECK(crowded[3].gpus.empty());
    CHECK(task_bindings(core_cpus, cores, gpus, 1, Affinity::off, Affinity::off)[0].cpus.empty());
    // Cores this machine does not have (a synthetic topology): no binding.
    CHECK(task_bindings({{0}}, cores, {}, 1, Affinity::on, Affinity::on)[0].cpus.empty());
}

TEST_CASE("cgroup: the unified hierarchy from mounts and /proc/self/cgroup", "[shell]") {
    std::string hybrid = "cgroup /sys/fs/cgroup/cpu cgroup rw 0 0\ncgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n";
    CHECK(own_unified_cgroup(hybrid, "4:memory:/x\n0::/\n") == "/sys/fs/cgroup/unified");
    CHECK(own_unified_cgroup("cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n", "0::/system.slice/banyan.service\n") ==
          "/sys/fs/cgroup/system.slice/banyan.service");
    CHECK_FALSE(own_unified_cgroup("cgroup /sys/fs/cgroup/cpu cgroup rw 0 0\n", "1:cpu:/\n").has_value());
}

TEST_CASE("cgroup: a job's cgroup is known by its name exactly", "[shell]") {
    CHECK(is_job_cgroup_name("banyan-1-4242-fAbc.2", 1, "fAbc"));
    CHECK(is_job_cgroup_name("banyan-0-1-fAbc.0", 0, "fAbc"));
    CHECK_FALSE(is_job_cgroup_name("banyan-10-4242-fAbc.2", 1, "fAbc"));  // another rank
    CHECK_FALSE(is_job_cgroup_name("banyan-1-4242-fAbcd.2", 1, "fAbc"));  // another job
    CHECK_FALSE(is_job_cgroup_name("banyan-1-4242-xfAbc.2", 1, "fAbc"));
    CHECK_FALSE(is_job_cgroup_name("banyan-1-42x2-fAbc.2", 1, "fAbc"));  // no PID
    CHECK_FALSE(is_job_cgroup_name("banyan-1--fAbc.2", 1, "fAbc"));
    CHECK_FALSE(is_job_cgroup_name("banyan-1-4242-fAbc.", 1, "fAbc"));     // no launch
    CHECK_FALSE(is_job_cgroup_name("banyan-1-4242-fAbc.2/x", 1, "fAbc"));  // below one
    CHECK_FALSE(is_job_cgroup_name("banyan-1-4242-fAbc", 1, "fAbc"));
    CHECK_FALSE(is_job_cgroup_name("banyan-unit-x-4242", 1, "fAbc"));
}

TEST_CASE("cgroup: the v1 memory hierarchy from mounts and /proc/self/cgroup", "[shell][memory]") {
    std::string hybrid =
        "cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n"
        "cgroup /sys/fs/cgroup/memory cgroup rw,nosuid,memory 0 0\n"
        "cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n";
    CHECK(own_v1_memory_cgroup(hybrid, "5:memory:/system.slice/banyan.service\n0::/\n") ==
          "/sys/fs/cgroup/memory/system.slice/banyan.service");
    CHECK(own_v1_memory_cgroup(hybrid, "4:cpu,memory:/\n") == "/sys/fs/cgroup/memory");
    CHECK_FALSE(own_v1_memory_cgroup("cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n", "0::/\n").has_value());
}

TEST_CASE("cgroup: a memory limit is written where the controller is; it and OOM kills are read back",
          "[shell][memory]") {
    // Directories laid out as the kernel's files are (what v2 and v1 have
    // in a job's cgroup), so that both are checked on any machine.
    auto scratch = std::filesystem::temp_directory_path() / fmt::format("banyan-memory-{}", getpid());
    std::filesystem::create_directories(scratch);
    auto put = [](const std::filesystem::path& file, const std::string& text) { std::ofstream(file) << text; };
    auto get = [](const std::filesystem::path& file) {
        std::ifstream in(file);
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    {
        auto v2 = JobCgroup::create((scratch / "v2").string());
        REQUIRE(v2.ok());
        put(scratch / "v2" / "memory.max", "max\n");
        put(scratch / "v2" / "memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n");
        CHECK_FALSE(v2->memory_limit().has_value());
        CHECK(v2->limit_memory(64ull << 20).ok());
        CHECK(get(scratch / "v2" / "memory.max") == "67108864");
        // As a restarted broker reads it back from a re-attached shell's.
        auto adopted = JobCgroup::open_existing((scratch / "v2").string());
        REQUIRE(adopted.ok());
        CHECK(adopted->memory_limit() == 64ull << 20);
        adopted->keep();
        CHECK(v2->oom_kills() == 2);

        auto v1 = JobCgroup::create((scratch / "v1").string());
        REQUIRE(v1.ok());
        put(scratch / "v1" / "memory.limit_in_bytes", "9223372036854771712\n");
        put(scratch / "v1" / "memory.memsw.limit_in_bytes", "9223372036854771712\n");
        put(scratch / "v1" / "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n");
        CHECK_FALSE(v1->memory_limit().has_value());  // v1's "no limit"
        CHECK(v1->limit_memory(1ull << 30).ok());
        CHECK(v1->memory_limit() == 1ull << 30);
        CHECK(get(scratch / "v1" / "memory.limit_in_bytes") == "1073741824");
        CHECK(get(scratch / "v1" / "memory.memsw.limit_in_bytes") == "1073741824");
        CHECK(v1->oom_kills() == 1);

        auto none = JobCgroup::create((scratch / "none").string());
        REQUIRE(none.ok());
        auto refused = none->limit_memory(1ull << 30);
        REQUIRE_FALSE(refused.ok());
        CHECK(refused.error().message.find("no memory controller") != std::string::npos);
        CHECK(none->oom_kills() == 0);
        CHECK_FALSE(none->memory_limit().has_value());
        CHECK_FALSE(JobCgroup::open_existing((scratch / "gone").string()).ok());
    }
    std::filesystem::remove_all(scratch);
}

namespace {

// A fresh cgroup under ours, or nullopt (with a warning) where there is
// no writable cgroup2 hierarchy.
std::optional<JobCgroup> scratch_cgroup(const char* name) {
    auto mounts = read_text_file("/proc/self/mounts");
    auto own = read_text_file("/proc/self/cgroup");
    auto parent = mounts && own ? own_unified_cgroup(*mounts, *own) : std::nullopt;
    if (!parent || access(parent->c_str(), W_OK) != 0) {
        WARN("no writable cgroup2 hierarchy here: nothing to check");
        return std::nullopt;
    }
    auto cg = JobCgroup::create(fmt::format("{}/banyan-unit-{}-{}", *parent, name, getpid()));
    if (!cg)
        FAIL(cg.error().message);
    return std::move(*cg);
}

// The first line of `cat /proc/self/cgroup` started in `cg`: "0::/..." on
// the unified hierarchy.
std::string cgroup_of_child(const JobCgroup& cg) {
    int fds[2];
    if (pipe(fds) != 0)
        return "pipe failed";
    Reactor reactor;
    auto p = Subprocess::spawn(reactor, {.argv = {"cat", "/proc/self/cgroup"}, .stdout_fd = fds[1], .cgroup_fd = cg.fd()},
                               [&](int) { reactor.stop(); });
    close(fds[1]);
    if (!p) {
        close(fds[0]);
        return p.error().message;
    }
    reactor.run_for(std::chrono::seconds(5));
    char buf[4096] = {};
    ssize_t n = read(fds[0], buf, sizeof buf - 1);
    close(fds[0]);
    return std::string(buf, static_cast<size_t>(std::max<ssize_t>(n, 0)));
}

}  // namespace

TEST_CASE("cgroup: a shell starts inside its job's cgroup", "[shell]") {
    auto cg = scratch_cgroup("clone3");
    if (!cg)
        return;
    std::string leaf = cg->dir().substr(cg->dir().rfind('/'));
    CHECK(cgroup_of_child(*cg).find("0::" + leaf) != std::string::npos);
    // Another broker's cgroup of the same name is never shared.
    auto again = JobCgroup::create(cg->dir());
    REQUIRE(!again.ok());
    CHECK(again.error().code == EEXIST);
}

TEST_CASE("cgroup: where clone3 is refused, the child joins its cgroup itself", "[shell]") {
    auto cg = scratch_cgroup("fork");
    if (!cg)
        return;
    std::string leaf = cg->dir().substr(cg->dir().rfind('/'));
    // In a child of this test: a seccomp filter answers clone3 with ENOSYS,
    // as container runtimes' default profiles do.
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        sock_filter filter[] = {
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        sock_fprog program{static_cast<unsigned short>(std::size(filter)), filter};
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0)
            _exit(2);
        _exit(cgroup_of_child(*cg).find("0::" + leaf) != std::string::npos ? 0 : 1);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("the PMIx callbacks' barrier turns every throw into a status", "[shell]") {
    CHECK(pmix_barrier([] { return PMIX_SUCCESS; }) == PMIX_SUCCESS);
    CHECK(pmix_barrier([]() -> pmix_status_t { throw std::bad_alloc(); }) == PMIX_ERR_OUT_OF_RESOURCE);
    CHECK(pmix_barrier([]() -> pmix_status_t { throw std::runtime_error("injected"); }) == PMIX_ERROR);
    CHECK(pmix_barrier([]() -> pmix_status_t { throw 7; }) == PMIX_ERROR);
}

namespace {

// Reads from `fd` on the loop until `bytes` came or EOF; what came.
std::string read_on_loop(Reactor& reactor, int fd, size_t bytes, bool* eof = nullptr) {
    std::string got;
    bool ended = false;
    FdWatcher watch(reactor, fd, FdWatcher::Event::readable, [&] {
        char buf[65536];
        ssize_t n = read(fd, buf, sizeof buf);
        if (n > 0)
            got.append(buf, static_cast<size_t>(n));
        else if (n == 0)
            ended = true;
    });
    auto deadline = Clock::now() + std::chrono::seconds(10);
    while (got.size() < bytes && !ended && Clock::now() < deadline)
        reactor.run_for(std::chrono::milliseconds(5));
    if (eof)
        *eof = ended;
    return got;
}

}  // namespace

TEST_CASE("the PMIx relay passes bytes both ways, in order, and closes both sides together", "[shell]") {
    Reactor reactor;
    int task[2], library[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, task) == 0);
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, library) == 0);
    UniqueFd task_end(task[0]), library_end(library[0]);
    SocketRelay relay(reactor, UniqueFd(task[1]), UniqueFd(library[1]));
    fcntl(task_end.get(), F_SETFL, O_NONBLOCK);
    fcntl(library_end.get(), F_SETFL, O_NONBLOCK);

    REQUIRE(write(task_end.get(), "hello", 5) == 5);
    CHECK(read_on_loop(reactor, library_end.get(), 5) == "hello");
    REQUIRE(write(library_end.get(), "world", 5) == 5);
    CHECK(read_on_loop(reactor, task_end.get(), 5) == "world");

    // More than the socket buffers and the relay's queue limit hold, while
    // the reader is slow to start: everything arrives, in order.
    std::string big(12 << 20, '\0');
    for (size_t i = 0; i < big.size(); i++)
        big[i] = static_cast<char>(i * 7 + i / 4096);
    size_t sent = 0;
    std::string got;
    FdWatcher writer(reactor, library_end.get(), FdWatcher::Event::writable, [&] {
        if (sent < big.size()) {
            ssize_t n = write(library_end.get(), big.data() + sent, std::min<size_t>(big.size() - sent, 1 << 20));
            if (n > 0)
                sent += static_cast<size_t>(n);
        }
    });
    for (int i = 0; i < 20; i++)
        reactor.run_for(std::chrono::milliseconds(5));
    got = read_on_loop(reactor, task_end.get(), big.size());
    CHECK(sent == big.size());
    CHECK(got.size() == big.size());
    CHECK(got == big);
    CHECK(relay.open());

    // The library closes: the task sees EOF, and the relay is done.
    library_end.reset();
    bool eof = false;
    CHECK(read_on_loop(reactor, task_end.get(), 1, &eof).empty());
    CHECK(eof);
    CHECK_FALSE(relay.open());
}
