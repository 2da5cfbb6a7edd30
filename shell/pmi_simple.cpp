#include "shell/pmi_simple.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "core/log.hpp"
#include "core/pmi_wire.hpp"
#include "core/text.hpp"

namespace banyan {
namespace {

// What get_maxes announces; longer keys and values are refused at put.
constexpr size_t kKvsnameMax = 256;
constexpr size_t kKeyMax = 256;
constexpr size_t kValueMax = 1024;
// A command line longer than this is malformed (a put is well below it).
constexpr size_t kLineMax = 4096;
// One shell's puts between two barriers: a task that puts without bound
// fails instead of filling the shell's memory. (The whole job's, as the
// fence carries them, are bounded by the exec service: 12 MiB.)
constexpr size_t kPendingMax = size_t{8} << 20;

// A message in an answer: the protocol splits words on spaces.
std::string protocol_word(std::string text) {
    for (char& c : text)
        if (c == ' ' || c == '\n' || c == '=')
            c = '_';
    return text;
}

}  // namespace

struct PmiSimpleServer::Connection {
    uint32_t task = 0;
    UniqueFd fd;
    std::unique_ptr<FdWatcher> watch;
    std::string buffer;
    bool initialized = false;
    bool finalized = false;
    bool aborted = false;
    bool in_barrier = false;
    uint64_t barriers = 0;  // completed by this task
};

PmiSimpleServer::PmiSimpleServer(Reactor& reactor, const ShellJob& job, Handlers handlers)
    : reactor_(reactor), job_(job), handlers_(std::move(handlers)), kvsname_("banyan-" + format_jobid(job.id)) {
    kvs_["PMI_process_mapping"] = process_mapping(job.map);
}

PmiSimpleServer::~PmiSimpleServer() = default;

std::string PmiSimpleServer::process_mapping(const TaskMap& map) {
    // Nodes (shells with tasks) in order; runs of equal tasks per node make
    // one (start, count, ppn) block.
    std::string out = "(vector";
    uint32_t node = 0, start = 0, count = 0, ppn = 0;
    for (const auto& b : map.blocks) {
        if (b.ntasks == 0)
            continue;
        if (count > 0 && b.ntasks != ppn) {
            out += fmt::format(",({},{},{})", start, count, ppn);
            count = 0;
        }
        if (count == 0) {
            start = node;
            ppn = b.ntasks;
        }
        count++;
        node++;
    }
    if (count > 0)
        out += fmt::format(",({},{},{})", start, count, ppn);
    return out + ")";
}

Result<UniqueFd> PmiSimpleServer::connect_task(uint32_t task) {
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) != 0)
        return make_error(errno, fmt::format("PMI socket for task {}: {}", task, std::strerror(errno)));
    UniqueFd ours(fds[0]), theirs(fds[1]);
    // The task's end blocks, as PMI clients expect.
    int flags = fcntl(theirs.get(), F_GETFL);
    fcntl(theirs.get(), F_SETFL, flags & ~O_NONBLOCK);
    auto c = std::make_unique<Connection>();
    c->task = task;
    c->fd = std::move(ours);
    Connection* raw = c.get();
    c->watch = std::make_unique<FdWatcher>(reactor_, raw->fd.get(), FdWatcher::Event::readable,
                                           [this, raw] { on_readable(*raw); });
    connections_[task] = std::move(c);
    return theirs;
}

std::vector<std::string> PmiSimpleServer::task_environment(uint32_t task) const {
    return {"PMI_FD=3", fmt::format("PMI_RANK={}", task), fmt::format("PMI_SIZE={}", job_.map.ntasks), "PMI_SPAWNED=0"};
}

bool PmiSimpleServer::on_readable(Connection& c) {
    char chunk[4096];
    ssize_t n = read(c.fd.get(), chunk, sizeof chunk);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return false;
    if (n <= 0) {
        close_connection(c);  // judged when the task exits
        return false;
    }
    c.buffer.append(chunk, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = c.buffer.find('\n', start)) != std::string::npos; start = nl + 1) {
        std::string line = c.buffer.substr(start, nl - start);
        on_line(c, line);
        if (!c.fd)
            return true;  // failed or closed
    }
    c.buffer.erase(0, start);
    if (c.buffer.size() > kLineMax)
        fail(c, fmt::format("a command longer than {} bytes", kLineMax));
    return true;
}

void PmiSimpleServer::on_line(Connection& c, const std::string& line) {
    auto parsed = parse_pmi_line(line);
    if (!parsed)
        return fail(c, fmt::format("malformed command '{}' (expected cmd=NAME KEY=VALUE...)", line));
    auto& args = *parsed;
    auto arg = [&](const char* key) { return args.count(key) ? args[key] : std::string(); };
    const std::string cmd = arg("cmd");
    if (cmd == "init") {
        if (arg("pmi_version") != "1")
            return reply(c, "cmd=response_to_init rc=-1 pmi_version=1 pmi_subversion=1");
        c.initialized = true;
        return reply(c, "cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1");
    }
    if (!c.initialized)
        return fail(c, fmt::format("'{}' before init", cmd));
    if (cmd == "get_maxes")
        return reply(c, fmt::format("cmd=maxes rc=0 kvsname_max={} keylen_max={} vallen_max={}", kKvsnameMax, kKeyMax,
                                    kValueMax));
    if (cmd == "get_appnum")
        return reply(c, "cmd=appnum rc=0 appnum=0");
    if (cmd == "get_universe_size")
        return reply(c, fmt::format("cmd=universe_size rc=0 size={}", job_.map.ntasks));
    if (cmd == "get_my_kvsname")
        return reply(c, "cmd=my_kvsname rc=0 kvsname=" + kvsname_);
    if (cmd == "put" || cmd == "get") {
        const std::string answer = cmd + "_result";
        if (arg("kvsname") != kvsname_)
            return reply(c, fmt::format("cmd={} rc=-1 msg=unknown_kvsname_{}", answer, protocol_word(arg("kvsname"))));
        std::string key = arg("key");
        if (key.empty() || key.size() > kKeyMax || key.find('=') != std::string::npos)
            return reply(c, fmt::format("cmd={} rc=-1 msg=key_empty_over_{}_bytes_or_with_=", answer, kKeyMax));
        if (cmd == "get") {
            auto it = kvs_.find(key);
            if (it != kvs_.end())
                return reply(c, "cmd=get_result rc=0 value=" + it->second);
            it = pending_.find(key);  // this node's own, before the barrier
            if (it != pending_.end())
                return reply(c, "cmd=get_result rc=0 value=" + it->second);
            return reply(c, fmt::format("cmd=get_result rc=-1 msg=key_{}_not_found", protocol_word(key)));
        }
        if (!args.count("value"))
            return fail(c, "put without value=");
        std::string value = args["value"];
        if (value.size() > kValueMax)
            return reply(c, fmt::format("cmd=put_result rc=-1 msg=value_over_{}_bytes", kValueMax));
        if (pending_bytes_ + key.size() + value.size() + 2 > kPendingMax)
            return fail(c, fmt::format("more than {} MiB put before one barrier", kPendingMax >> 20));
        pending_bytes_ += key.size() + value.size() + 2;
        pending_[key] = std::move(value);
        return reply(c, "cmd=put_result rc=0");
    }
    if (cmd == "barrier_in") {
        if (c.in_barrier)
            return fail(c, "barrier_in twice");
        c.in_barrier = true;
        if (++in_barrier_ < job_.local.ntasks)
            return;
        std::string data;
        for (const auto& [k, v] : pending_)
            data += k + "=" + v + "\n";
        return handlers_.barrier(std::move(data));
    }
    if (cmd == "finalize") {
        c.finalized = true;
        return reply(c, "cmd=finalize_ack rc=0");
    }
    if (cmd == "abort") {
        c.aborted = true;
        std::string code = arg("exitcode").empty() ? arg("code") : arg("exitcode");
        std::string message = args.count("value") ? args["value"] : arg("msg");
        if (message.empty())
            message = arg("message");
        int status = 1;
        if (!code.empty())
            status = std::atoi(code.c_str());
        return handlers_.abort(c.task, status, message);
    }
    fail(c, fmt::format("unknown command '{}'", cmd));
}

void PmiSimpleServer::reply(Connection& c, const std::string& text) {
    std::string line = text + "\n";
    // Answers are small and a client waits for each: a full socket means a
    // client that sends without reading, which the protocol does not allow.
    ssize_t n = send(c.fd.get(), line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n == static_cast<ssize_t>(line.size()))
        return;
    if (n < 0 && errno == EPIPE)
        return close_connection(c);
    fail(c, "it does not read its answers");
}

void PmiSimpleServer::fail(Connection& c, std::string why) {
    uint32_t task = c.task;
    close_connection(c);
    c.aborted = true;  // reported once
    handlers_.failed(task, "PMI-1: " + why);
}

void PmiSimpleServer::close_connection(Connection& c) {
    c.watch.reset();
    c.fd.reset();
}

void PmiSimpleServer::task_exited(uint32_t task) {
    auto it = connections_.find(task);
    if (it == connections_.end())
        return;
    Connection& c = *it->second;
    // What it wrote last (an abort, which MPICH does not wait to see
    // answered) may still be unread: read it before judging.
    while (c.fd && !c.aborted && on_readable(c)) {
    }
    close_connection(c);
    if (!c.initialized || c.finalized || c.aborted)
        return;
    c.aborted = true;
    handlers_.failed(task, c.in_barrier ? "PMI-1: it exited inside a barrier, without finalize"
                                        : fmt::format("PMI-1: it exited after init, without finalize, before "
                                                      "barrier {} (the other tasks would wait in it)",
                                                      c.barriers + 1));
}

void PmiSimpleServer::barrier_done(const std::string& all_data) {
    for (size_t start = 0; start < all_data.size();) {
        size_t nl = all_data.find('\n', start);
        std::string_view line(all_data.data() + start, (nl == std::string::npos ? all_data.size() : nl) - start);
        size_t eq = line.find('=');
        if (eq != std::string_view::npos)
            kvs_[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
        if (nl == std::string::npos)
            break;
        start = nl + 1;
    }
    pending_.clear();
    pending_bytes_ = 0;
    in_barrier_ = 0;
    for (auto& [task, c] : connections_) {
        if (!c->in_barrier)
            continue;
        c->in_barrier = false;
        c->barriers++;
        if (c->fd)
            reply(*c, "cmd=barrier_out rc=0");
    }
}

}  // namespace banyan
