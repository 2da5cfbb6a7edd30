// banyan-imp: the one privileged part of Banyan (banyan-imp(8)). Installed
// setuid root and executable only by the group banyan, it lets the
// unprivileged brokers (1) start a job's shell as the user who signed the
// job, (2) run the node's prolog and epilog as root, and (3) start the
// node's eBPF profiler as root where imp.toml allows it. Everything it is
// told comes from the broker and is checked; everything it may do is in
// root's imp.toml.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/descriptors.hpp"
#include "core/json_field.hpp"
#include "core/json_parse.hpp"
#include "core/unique_fd.hpp"
#include "imp/imp_config.hpp"
#include "imp/signed_job.hpp"

using namespace banyan;

namespace {

// In `exec`, stdout is the shell's protocol: a refusal goes there too, as
// the job's exception, so its user reads why (doc/spec/shell.md §3).
bool g_exec = false;
// In `profiler`, stdout is the profiler's protocol: a refusal is its
// `error` line (doc/spec/profiling.md §2), which the broker passes on.
bool g_profiler = false;

[[noreturn]] void fail(const std::string& message, int code = 1) {
    std::fprintf(stderr, "banyan-imp: %s\n", message.c_str());
    if (g_exec) {
        std::string line =
            nlohmann::json{
                {"type", "exception"}, {"exception", "exec"}, {"severity", 0}, {"note", "banyan-imp: " + message}}
                .dump() +
            "\n";
        ssize_t ignored = write(1, line.data(), line.size());
        (void)ignored;
    }
    if (g_profiler) {
        std::string line = nlohmann::json{{"error", "banyan-imp: " + message}}.dump() + "\n";
        ssize_t ignored = write(1, line.data(), line.size());
        (void)ignored;
    }
    std::exit(code);
}

template <class T>
T must(Result<T> r) {
    if (!r)
        fail(r.error().message);
    return std::move(*r);
}

// The caller (by its real uid) must be one of allowed-users.
void check_caller(const ImpConfig& config) {
    uid_t caller = getuid();
    if (caller == 0)
        return;
    const passwd* pw = getpwuid(caller);
    std::string name = pw ? pw->pw_name : std::to_string(caller);
    for (const auto& user : config.allowed_users)
        if (user == name || user == std::to_string(caller))
            return;
    fail(fmt::format("uid {} ({}) may not use banyan-imp (imp.toml: allowed-users)", caller, name));
}

std::string read_all(int fd, size_t limit) {
    std::string data;
    char buf[65536];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            fail(fmt::format("reading the request: {}", std::strerror(errno)));
        if (n == 0)
            return data;
        data.append(buf, static_cast<size_t>(n));
        if (data.size() > limit)
            fail("the request is too large");
    }
}

// The job's run directory, which the broker made: NAME inside PARENT,
// which must be the caller's own and writable by no one else (so this
// hands the user nothing the caller could not make), the directory itself
// the caller's or already the user's (a shell that ran as the user made
// it before). Checked before the credential is spent: a start that cannot
// succeed spends nothing.
UniqueFd check_job_dir(const std::string& path, uid_t user) {
    auto slash = path.rfind('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == path.size())
        fail(fmt::format("tmpdir {}: not an absolute path of a directory", path));
    std::string parent = path.substr(0, slash), name = path.substr(slash + 1);
    if (name == "." || name == "..")
        fail(fmt::format("tmpdir {}: not a directory name", path));
    UniqueFd dir(open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!dir)
        fail(fmt::format("tmpdir {}: {}", parent, std::strerror(errno)));
    struct stat st {};
    if (fstat(dir.get(), &st) != 0 || st.st_uid != getuid() || (st.st_mode & (S_IWGRP | S_IWOTH)))
        fail(fmt::format("tmpdir {}: its directory must be the caller's and writable by no one else", path));
    UniqueFd made(openat(dir.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    struct stat mine {};
    if (!made || fstat(made.get(), &mine) != 0)
        fail(fmt::format("tmpdir {}: {} (the broker makes it)", path, std::strerror(errno)));
    if (mine.st_uid != user && mine.st_uid != getuid())
        fail(fmt::format("tmpdir {}: owned by uid {}", path, mine.st_uid));
    return made;
}

// Hands the run directory to the user. The group is the caller's and the
// directory setgid, so the broker can reach the socket its shell makes
// there (doc/spec/shell.md §8).
void give_job_dir(const UniqueFd& dir, const std::string& path, uid_t user) {
    if (fchown(dir.get(), user, getgid()) != 0 || fchmod(dir.get(), 02750) != 0)
        fail(fmt::format("tmpdir {}: {}", path, std::strerror(errno)));
}

// The user's lock on this node, held shared by each of the user's shells
// for as long as it runs: the shell that takes it alone at its end is the
// user's last on the node and removes the user's files in /dev/shm
// (doc/spec/shell.md §1). Root's file, in state-dir: no other user can
// hold it to stop that. Taken before the shell starts, so a new job of the
// user waits for a clean-up under way, which then cannot remove its files.
UniqueFd hold_user_lock(const ImpConfig& config, uid_t user) {
    std::string dir = config.state_dir + "/users";
    if ((mkdir(config.state_dir.c_str(), 0700) != 0 && errno != EEXIST) || (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST))
        fail(fmt::format("state-dir {}: {}", dir, std::strerror(errno)));
    std::string path = fmt::format("{}/{}.lock", dir, user);
    UniqueFd fd(open(path.c_str(), O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd)
        fail(fmt::format("{}: {}", path, std::strerror(errno)));
    while (flock(fd.get(), LOCK_SH) != 0)
        if (errno != EINTR)
            fail(fmt::format("{}: {}", path, std::strerror(errno)));
    return fd;
}

// Becomes `pw` for good: supplementary groups, gid, uid (real, effective
// and saved, so root cannot come back).
void become(const passwd& pw) {
    if (initgroups(pw.pw_name, pw.pw_gid) != 0 || setresgid(pw.pw_gid, pw.pw_gid, pw.pw_gid) != 0 ||
        setresuid(pw.pw_uid, pw.pw_uid, pw.pw_uid) != 0)
        fail(fmt::format("cannot become {}: {}", pw.pw_name, std::strerror(errno)));
    if (pw.pw_uid != 0 && setuid(0) == 0)
        fail("could become root again after dropping it");
}

// This node's host name, by the helper itself (never its caller's word).
std::string this_host() {
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) != 0)
        fail(fmt::format("gethostname: {}", std::strerror(errno)));
    return name;
}

// exec: fd 3 holds {"id", "rank", "userid", "J", "R", "tmpdir"} (the broker
// writes it to a memfd); stdin and stdout are the shell's protocol, passed
// on untouched. The shell gets the jobspec the user signed on fd 3, the
// user's lock on fd 4 (held shared), an environment made here from
// nothing, and no other descriptor (doc/spec/shell.md §3.1).
int exec_shell(const ImpConfig& config) {
    std::string text = read_all(3, 64 << 20);
    close(3);
    auto request = must(parse_json(text));
    auto id = json_field<uint64_t>(request, "id", 0, "request");
    auto rank = json_field<uint32_t>(request, "rank", 0, "request");
    auto userid = json_field<uint32_t>(request, "userid", 0, "request");
    auto credential = json_field<std::string>(request, "J", "", "request");
    auto tmpdir = json_field<std::string>(request, "tmpdir", "", "request");
    auto R = json_field<nlohmann::json>(request, "R", nlohmann::json(), "request");
    if (auto e = first_error(id, rank, userid, credential, tmpdir, R))
        fail(e->message);
    if (!request.contains("userid"))
        fail("request.userid: missing");
    if (!R->is_object())
        fail("request.R: missing (the job's R)");
    if (*userid == 0 && !config.allow_root)
        fail("jobs of root do not run here (imp.toml: allow-root)");
    const passwd* found = getpwuid(*userid);
    if (!found)
        fail(fmt::format("uid {} has no entry in the password database", *userid));
    passwd pw = *found;
    std::string name = pw.pw_name, home = pw.pw_dir, shell = pw.pw_shell;
    pw.pw_name = name.data();
    SignedJobRequest signed_request{
        .credential = *credential, .userid = *userid, .id = *id, .rank = *rank, .R = *R, .hostname = this_host()};
    SignedJob job = must(check_signed_job(signed_request, config));
    UniqueFd dir = check_job_dir(*tmpdir, *userid);
    if (auto spent = record_first_use(signed_request, job, config); !spent)
        fail(spent.error().message);
    give_job_dir(dir, *tmpdir, *userid);
    dir.reset();
    int memfd = memfd_create("signed-jobspec", MFD_CLOEXEC);
    // (fd 3 was closed above, so the memfd may be 3 already: dup2 then
    // keeps its close-on-exec, which is cleared here either way.)
    if (memfd < 0 || write(memfd, job.jobspec.data(), job.jobspec.size()) != static_cast<ssize_t>(job.jobspec.size()) ||
        lseek(memfd, 0, SEEK_SET) != 0 || dup2(memfd, 3) != 3 || fcntl(3, F_SETFD, 0) != 0)
        fail(fmt::format("passing the jobspec on: {}", std::strerror(errno)));
    if (memfd != 3)
        close(memfd);
    UniqueFd lock = hold_user_lock(config, *userid);
    if (dup2(lock.get(), 4) != 4 || fcntl(4, F_SETFD, 0) != 0)
        fail(fmt::format("passing the user's lock on: {}", std::strerror(errno)));
    if (lock.get() == 4)
        (void)lock.release();
    become(pw);
    // Nothing of the caller's environment reaches the shell: a library
    // search variable (HWLOC_PLUGINS_PATH, GCONV_PATH, ...) would load the
    // caller's code as the user. The job's own environment is the
    // jobspec's, which the shell gives its tasks.
    clearenv();
    setenv("HOME", home.c_str(), 1);
    setenv("USER", name.c_str(), 1);
    setenv("LOGNAME", name.c_str(), 1);
    setenv("SHELL", shell.c_str(), 1);
    setenv("PATH", "/usr/local/bin:/usr/bin:/bin", 1);
    close_descriptors_from(5);
    std::string shell_path = config.shell, option = "--signed-jobspec-fd=3", lock_option = "--user-lock-fd=4";
    char* argv[] = {shell_path.data(), option.data(), lock_option.data(), nullptr};
    execv(shell_path.c_str(), argv);
    fail(fmt::format("{}: {}", config.shell, std::strerror(errno)), 127);
}

// run prolog|epilog: the command of imp.toml as root, with the job's
// variables the broker set (BANYAN_JOB_*, BANYAN_R) and a plain PATH.
int run_script(const ImpConfig& config, const std::string& which) {
    const auto& command = which == "prolog" ? config.prolog : config.epilog;
    if (!command)
        fail(fmt::format("imp.toml names no {}", which));
    std::vector<std::string> keep;
    for (char** e = environ; *e; e++)
        if (std::strncmp(*e, "BANYAN_JOB_", 11) == 0 || std::strncmp(*e, "BANYAN_R=", 9) == 0)
            keep.emplace_back(*e);
    clearenv();
    for (auto& kv : keep)
        putenv(kv.data());
    setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", 1);
    if (setgroups(0, nullptr) != 0 || setresgid(0, 0, 0) != 0 || setresuid(0, 0, 0) != 0)
        fail(fmt::format("cannot become root: {}", std::strerror(errno)));
    execl("/bin/sh", "sh", "-c", command->c_str(), static_cast<char*>(nullptr));
    fail(fmt::format("/bin/sh: {}", std::strerror(errno)), 127);
}

// profiler: banyan-profiler as root, with stdin and stdout (the exec
// service's protocol) and nothing else of the caller's: no environment,
// no other descriptor. It loads the eBPF programs and counts only the
// caller's own children (doc/spec/profiling.md §2).
int run_profiler(const ImpConfig& config) {
    if (!config.profiling)
        fail("eBPF profiling is off on this node (imp.toml: profiling = true turns it on)");
    if (setgroups(0, nullptr) != 0 || setresgid(0, 0, 0) != 0 || setresuid(0, 0, 0) != 0)
        fail(fmt::format("cannot become root: {}", std::strerror(errno)));
    clearenv();
    setenv("PATH", "/usr/sbin:/usr/bin:/sbin:/bin", 1);
    close_descriptors_from(3);
    std::string path = config.profiler;
    char* argv[] = {path.data(), nullptr};
    execv(path.c_str(), argv);
    fail(fmt::format("{}: {}", path, std::strerror(errno)), 127);
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    bool exec = args.size() == 1 && args[0] == "exec";
    bool run = args.size() == 2 && args[0] == "run" && (args[1] == "prolog" || args[1] == "epilog");
    bool profiler = args.size() == 1 && args[0] == "profiler";
    if (!exec && !run && !profiler)
        fail("usage: banyan-imp exec | banyan-imp run prolog|epilog | banyan-imp profiler (started by banyan-broker; "
             "see banyan-imp(8))",
             2);
    g_exec = exec;
    g_profiler = profiler;
    if (geteuid() != 0)
        fail("not setuid root (install it root:banyan, mode 4750)");
    std::string path = imp_config_path();
    ImpConfig config = must(load_imp_config(path));
    check_caller(config);
    if (profiler)
        return run_profiler(config);
    return exec ? exec_shell(config) : run_script(config, args[1]);
}
