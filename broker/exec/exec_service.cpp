#include "broker/exec/exec_service.hpp"

#include <csignal>
#include <cstring>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/duration.hpp"
#include "core/json_field.hpp"
#include "core/log.hpp"
#include "resource/rv1.hpp"

namespace banyan {
namespace {

// An owned file descriptor.
struct Fd {
    int fd = -1;
    Fd() = default;
    explicit Fd(int f) : fd(f) {}
    Fd(Fd&& o) noexcept : fd(std::exchange(o.fd, -1)) {}
    Fd& operator=(Fd&& o) noexcept {
        reset();
        fd = std::exchange(o.fd, -1);
        return *this;
    }
    ~Fd() { reset(); }
    void reset() {
        if (fd >= 0)
            close(fd);
        fd = -1;
    }
};

// Output is sent as JSON strings, which must be UTF-8: invalid bytes
// become U+FFFD rather than failing the whole chunk.
std::string valid_utf8(const std::string& in) {
    std::string out;
    out.reserve(in.size());
    for (size_t i = 0; i < in.size();) {
        auto c = static_cast<unsigned char>(in[i]);
        size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
        bool ok = len > 0 && i + len <= in.size();
        for (size_t k = 1; ok && k < len; k++)
            ok = (static_cast<unsigned char>(in[i + k]) >> 6) == 0x2;
        if (ok) {
            out.append(in, i, len);
            i += len;
        } else {
            out += "\xef\xbf\xbd";
            i++;
        }
    }
    return out;
}

// Seconds from a run_duration given as a number or as "10s"-style text.
Result<double> run_duration(const nlohmann::json& v) {
    if (v.is_number())
        return v.get<double>();
    if (v.is_string())
        return parse_duration(v.get<std::string>(), BareNumber::seconds);
    return make_error(EINVAL, "attributes.system.exec.test.run_duration: expected seconds or a duration like 10s");
}

std::string replace_all(std::string text, std::string_view from, std::string_view to) {
    for (size_t pos = text.find(from); pos != std::string::npos; pos = text.find(from, pos + to.size()))
        text.replace(pos, from.size(), to);
    return text;
}

}  // namespace

struct ExecService::Task {
    uint32_t rank = 0;
    std::unique_ptr<Subprocess> proc;
    Fd out, err;  // read ends of the pipes, when output goes to rank 0
    std::unique_ptr<FdWatcher> out_watch, err_watch;
};

struct ExecService::LocalJob {
    Message req;  // exec.run, answered when every task has exited
    std::vector<std::unique_ptr<Task>> tasks;
    size_t running = 0;
    int max_status = 0;
    std::unique_ptr<Timer> simulated;
};

std::unique_ptr<ExecService> ExecService::start(Broker& broker) {
    std::unique_ptr<ExecService> svc(new ExecService(broker));
    broker.register_method("exec.run", true, [s = svc.get()](const Message& r) { s->on_run(r); });
    broker.register_method("exec.kill", true, [s = svc.get()](const Message& r) { s->on_kill(r); });
    return svc;
}

ExecService::ExecService(Broker& broker) : broker_(broker) {}
ExecService::~ExecService() = default;

void ExecService::on_run(const Message& req) {
    auto body = req.json();
    if (!body)
        return broker_.respond_error(req, EPROTO, body.error().message);
    const nlohmann::json& p = *body;
    auto id = json_field<uint64_t>(p, "id", 0, "exec.run");
    auto userid = json_field<uint32_t>(p, "userid", getuid(), "exec.run");
    auto size = json_field<uint32_t>(p, "size", 1, "exec.run");
    auto tasks = json_field<nlohmann::json>(p, "tasks", nlohmann::json::array(), "exec.run");
    if (!id || !userid || !size || !tasks)
        return broker_.respond_error(req, EPROTO, (!id ? id.error() : !userid ? userid.error() : !size ? size.error() : tasks.error()).message);
    if (tasks->size() != 2 || !(*tasks)[0].is_number_unsigned() || !(*tasks)[1].is_number_unsigned())
        return broker_.respond_error(req, EPROTO, "exec.run.tasks: expected [first, count]");
    if (!p.contains("jobspec") || !p["jobspec"].is_object())
        return broker_.respond_error(req, EPROTO, "exec.run: expected a jobspec");
    if (jobs_.count(*id))
        return broker_.respond_error(req, EEXIST, fmt::format("{} already runs here", format_jobid(*id)));
    if (*userid != getuid())
        return broker_.respond_error(req, EPERM,
                                     fmt::format("cannot run tasks as uid {}: this broker runs as uid {}", *userid,
                                                 getuid()));
    const nlohmann::json& spec = p["jobspec"];
    auto job = std::make_unique<LocalJob>();
    job->req = req;
    job->req.payload.reset();  // enough to answer it
    const auto& test = json_object_at(spec, {"attributes", "system", "exec", "test"});
    if (test.contains("run_duration")) {
        auto seconds = run_duration(test["run_duration"]);
        if (!seconds)
            return broker_.respond_error(req, EINVAL, seconds.error().message);
        job->simulated = std::make_unique<Timer>(broker_.reactor());
        job->simulated->start(std::chrono::milliseconds(static_cast<int64_t>(*seconds * 1000)),
                              [this, id = *id] { finish(id); });
        jobs_.emplace(*id, std::move(job));
        return;
    }
    uint32_t nnodes = 1;
    if (auto r = Rv1::from_json(p.value("R", nlohmann::json())))
        nnodes = static_cast<uint32_t>(r->ranks.size());
    LocalJob& j = *jobs_.emplace(*id, std::move(job)).first->second;
    if (auto r = spawn_tasks(*id, j, spec, (*tasks)[0].get<uint32_t>(), (*tasks)[1].get<uint32_t>(), *size, nnodes); !r) {
        jobs_.erase(*id);  // kills whatever did start
        return broker_.respond_error(req, r.error().code, r.error().message);
    }
    if (j.running == 0)
        finish(*id);
}

Result<void> ExecService::spawn_tasks(JobId id, LocalJob& job, const nlohmann::json& spec, uint32_t first,
                                      uint32_t count, uint32_t size, uint32_t nnodes) {
    const auto& system = json_object_at(spec, {"attributes", "system"});
    std::vector<std::string> argv;
    auto tasks = spec.find("tasks");
    if (tasks != spec.end() && tasks->is_array() && !tasks->empty() && (*tasks)[0].is_object())
        for (const auto& a : (*tasks)[0].value("command", nlohmann::json::array()))
            if (a.is_string())
                argv.push_back(a.get<std::string>());
    if (argv.empty())
        return make_error(EINVAL, "jobspec: tasks[0].command: empty");
    std::vector<std::string> env;
    if (system.contains("environment") && system["environment"].is_object()) {
        for (const auto& [k, v] : system["environment"].items())
            if (v.is_string() && !k.starts_with("BANYAN_"))
                env.push_back(k + "=" + v.get<std::string>());
    } else {
        for (char** e = environ; *e; e++)
            if (!std::string_view(*e).starts_with("BANYAN_"))
                env.emplace_back(*e);
    }
    env.push_back("BANYAN_JOB_ID=" + format_jobid(id));
    env.push_back(fmt::format("BANYAN_JOB_SIZE={}", size));
    env.push_back(fmt::format("BANYAN_JOB_NNODES={}", nnodes));
    env.push_back(fmt::format("BANYAN_URI=local://{}/local.sock", broker_.bootstrap().rundir));
    std::string cwd = system.value("cwd", nlohmann::json("")).is_string() ? system.value("cwd", "") : "";
    auto file_of = [&](const char* stream) -> std::string {
        const auto& s = json_object_at(system, {"shell", "options", "output", stream});
        if (!s.contains("path") || !s["path"].is_string())
            return "";
        return replace_all(s["path"].get<std::string>(), "{{id}}", format_jobid(id));
    };
    std::string out_path = file_of("stdout"), err_path = file_of("stderr");
    if (err_path.empty())
        err_path = out_path;
    auto open_file = [&](const std::string& path) -> Result<Fd> {
        std::string full = path.starts_with("/") || cwd.empty() ? path : cwd + "/" + path;
        int fd = open(full.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0)
            return make_error(errno, fmt::format("output file {}: {}", full, std::strerror(errno)));
        return Fd(fd);
    };
    for (uint32_t t = first; t < first + count; t++) {
        auto task = std::make_unique<Task>();
        task->rank = t;
        Fd child_out, child_err;
        for (bool is_err : {false, true}) {
            const std::string& path = is_err ? err_path : out_path;
            Fd& child = is_err ? child_err : child_out;
            if (!path.empty()) {
                auto f = open_file(path);
                if (!f)
                    return f.error();
                child = std::move(*f);
                continue;
            }
            int fds[2];
            if (pipe2(fds, O_CLOEXEC) < 0)
                return make_error(errno, fmt::format("pipe: {}", std::strerror(errno)));
            fcntl(fds[0], F_SETFL, O_NONBLOCK);
            (is_err ? task->err : task->out) = Fd(fds[0]);
            child = Fd(fds[1]);
        }
        std::vector<std::string> task_env = env;
        task_env.push_back(fmt::format("BANYAN_TASK_RANK={}", t));
        Task* raw = task.get();
        auto proc = Subprocess::spawn(broker_.reactor(),
                                      {.argv = argv, .env = task_env, .cwd = cwd, .stdout_fd = child_out.fd,
                                       .stderr_fd = child_err.fd},
                                      [this, id, raw](int status) { on_task_exit(id, *raw, status); });
        if (!proc)
            return proc.error();
        task->proc = std::move(*proc);
        if (task->out.fd >= 0)
            task->out_watch = std::make_unique<FdWatcher>(broker_.reactor(), task->out.fd, FdWatcher::Event::readable,
                                                          [this, id, raw] { read_output(id, *raw, false); });
        if (task->err.fd >= 0)
            task->err_watch = std::make_unique<FdWatcher>(broker_.reactor(), task->err.fd, FdWatcher::Event::readable,
                                                          [this, id, raw] { read_output(id, *raw, true); });
        job.tasks.push_back(std::move(task));
        job.running++;
    }
    return {};
}

void ExecService::read_output(JobId id, Task& task, bool is_stderr) {
    Fd& fd = is_stderr ? task.err : task.out;
    char buf[65536];
    for (;;) {
        if (fd.fd < 0)
            return;
        ssize_t n = read(fd.fd, buf, sizeof buf);
        if (n > 0) {
            forward_output(id, is_stderr ? "stderr" : "stdout", std::string(buf, static_cast<size_t>(n)));
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0 || errno != EAGAIN) {  // end of output
            (is_stderr ? task.err_watch : task.out_watch).reset();
            fd.reset();
        }
        return;
    }
}

void ExecService::forward_output(JobId id, const char* stream, std::string data) {
    nlohmann::json body{{"id", id}, {"rank", broker_.bootstrap().rank}, {"stream", stream}, {"data", valid_utf8(data)}};
    broker_.rpc(Message::request("job-manager.output", body, 0), [id](const Message& resp) {
        if (resp.errnum)
            log::warning("exec", "{}: output lost: {}", format_jobid(id), resp.error_text());
    });
}

void ExecService::on_task_exit(JobId id, Task& task, int wait_status) {
    auto it = jobs_.find(id);
    if (it == jobs_.end())
        return;
    // What the task wrote before it exited is in the pipes now: send it
    // first, so it arrives before the answer (same route, in order).
    read_output(id, task, false);
    read_output(id, task, true);
    task.out_watch.reset();
    task.err_watch.reset();
    task.out.reset();
    task.err.reset();
    LocalJob& job = *it->second;
    job.max_status = std::max(job.max_status, exit_code_from_wait_status(wait_status));
    if (--job.running == 0)
        finish(id);
}

void ExecService::finish(JobId id) {
    auto it = jobs_.find(id);
    if (it == jobs_.end())
        return;
    broker_.respond(Message::response_to(it->second->req, {{"status", it->second->max_status}}));
    jobs_.erase(it);
}

void ExecService::on_kill(const Message& req) {
    auto body = req.json();
    if (!body)
        return broker_.respond_error(req, EPROTO, body.error().message);
    auto id = json_field<uint64_t>(*body, "id", 0, "exec.kill");
    auto signo = json_field<int64_t>(*body, "signal", SIGTERM, "exec.kill");
    if (!id || !signo || *signo < 1 || *signo >= NSIG)
        return broker_.respond_error(req, EPROTO, "exec.kill: expected {\"id\": JOBID, \"signal\": N}");
    auto it = jobs_.find(*id);
    if (it == jobs_.end())
        return broker_.respond_error(req, ENOENT, fmt::format("{} has nothing running here", format_jobid(*id)));
    LocalJob& job = *it->second;
    if (job.simulated) {
        // A simulated job "dies" of the signal at once.
        job.max_status = 128 + static_cast<int>(*signo);
        broker_.respond(Message::response_to(req, nlohmann::json::object()));
        return finish(*id);
    }
    for (auto& task : job.tasks)
        if (task->proc && task->proc->running())
            (void)task->proc->signal(static_cast<int>(*signo));
    broker_.respond(Message::response_to(req, nlohmann::json::object()));
}

}  // namespace banyan
