#include "shell/pmix_server.hpp"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>
#include <hwloc.h>
#include <pmix.h>
#include <pmix_server.h>

#include "core/log.hpp"
#include "shell/pmix_barrier.hpp"

namespace banyan {

// Everything the library's C callbacks reach. They run on the library's
// own thread: they lock `mutex` and post work to the shell's loop.
struct PmixServer::State {
    Reactor* reactor = nullptr;
    Handlers handlers;
    std::mutex mutex;
    uint64_t next_fence = 0;
    std::map<uint64_t, std::pair<pmix_modex_cbfunc_t, void*>> fences;  // waiting for fence_done
    bool stopped = false;
};

namespace {

std::shared_ptr<PmixServer::State> g_state;  // the library has no user pointer
constexpr std::chrono::seconds kFinalizeLimit(5);
std::atomic<bool> g_finalize_abandoned{false};

// Blocks until an asynchronous PMIx call reports back.
struct Completion {
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
    pmix_status_t status = PMIX_SUCCESS;
    static void callback(pmix_status_t status, void* cbdata) {
        auto* c = static_cast<Completion*>(cbdata);
        std::lock_guard lock(c->mutex);
        c->status = status;
        c->done = true;
        c->cv.notify_all();
    }
    // The outcome of a call that was given callback(): it either said so
    // at once or reports later.
    pmix_status_t result_of(pmix_status_t rc) {
        if (rc == PMIX_OPERATION_SUCCEEDED)
            return PMIX_SUCCESS;
        if (rc != PMIX_SUCCESS)
            return rc;
        std::unique_lock lock(mutex);
        cv.wait(lock, [this] { return done; });
        return status;
    }
};

Error pmix_error(pmix_status_t rc, std::string_view what) {
    return make_error(EIO, fmt::format("PMIx {}: {}", what, PMIx_Error_string(rc)));
}

pmix_status_t on_client_connected(const pmix_proc_t*, void*, pmix_op_cbfunc_t, void*) {
    return PMIX_OPERATION_SUCCEEDED;
}

pmix_status_t on_client_finalized(const pmix_proc_t*, void*, pmix_op_cbfunc_t, void*) {
    return PMIX_OPERATION_SUCCEEDED;
}

pmix_status_t on_abort(const pmix_proc_t* proc, void*, int status, const char msg[], pmix_proc_t*, size_t,
                       pmix_op_cbfunc_t, void*) noexcept {
    return pmix_barrier([&] {
        auto state = g_state;
        if (!state)
            return PMIX_ERR_NOT_SUPPORTED;
        uint32_t task = proc->rank;
        // "N/A" is what Open MPI passes when MPI_Abort was given no message.
        std::string message = msg && std::strcmp(msg, "N/A") != 0 ? msg : "";
        state->reactor->post([state, task, status, message] {
            if (!state->stopped)
                state->handlers.abort(task, status, message);
        });
        return PMIX_OPERATION_SUCCEEDED;  // the task goes on to exit; the job manager ends the rest
    });
}

pmix_status_t on_fence(const pmix_proc_t*, size_t, const pmix_info_t*, size_t, char* data, size_t ndata,
                       pmix_modex_cbfunc_t cbfunc, void* cbdata) noexcept {
    return pmix_barrier([&] {
        auto state = g_state;
        if (!state)
            return PMIX_ERR_NOT_SUPPORTED;
        uint64_t seq;
        {
            std::lock_guard lock(state->mutex);
            seq = state->next_fence++;
            state->fences[seq] = {cbfunc, cbdata};
        }
        std::string contribution(data ? data : "", ndata);
        state->reactor->post([state, seq, contribution = std::move(contribution)]() mutable {
            if (!state->stopped)
                state->handlers.fence(seq, std::move(contribution));
        });
        return PMIX_SUCCESS;
    });
}

pmix_status_t on_direct_modex(const pmix_proc_t*, const pmix_info_t*, size_t, pmix_modex_cbfunc_t, void*) {
    return PMIX_ERR_NOT_SUPPORTED;  // fences always collect every process's data
}

void release_fence_data(void* cbdata) {
    delete static_cast<std::string*>(cbdata);
}

// A list of infos that frees what PMIx_Info_load copied into it.
class InfoList {
  public:
    InfoList() = default;
    InfoList(const InfoList&) = delete;
    InfoList& operator=(const InfoList&) = delete;
    ~InfoList() {
        for (auto& i : infos_)
            PMIX_INFO_DESTRUCT(&i);
    }
    void add(const char* key, const void* value, pmix_data_type_t type) {
        infos_.emplace_back();
        PMIX_INFO_CONSTRUCT(&infos_.back());
        PMIx_Info_load(&infos_.back(), key, value, type);
    }
    void add_string(const char* key, const std::string& value) { add(key, value.c_str(), PMIX_STRING); }
    void add_u32(const char* key, uint32_t value) { add(key, &value, PMIX_UINT32); }
    void add_u16(const char* key, uint16_t value) { add(key, &value, PMIX_UINT16); }
    void add_rank(const char* key, pmix_rank_t value) { add(key, &value, PMIX_PROC_RANK); }
    void add_bool(const char* key, bool value) { add(key, &value, PMIX_BOOL); }
    // An info holding an array of infos (PMIX_PROC_DATA); `list` is copied.
    void add_array(const char* key, InfoList& list) {
        pmix_data_array_t array;
        PMIX_DATA_ARRAY_CONSTRUCT(&array, list.infos_.size(), PMIX_INFO);
        auto* dest = static_cast<pmix_info_t*>(array.array);
        for (size_t i = 0; i < list.infos_.size(); i++)
            PMIx_Info_xfer(&dest[i], &list.infos_[i]);
        add(key, &array, PMIX_DATA_ARRAY);
        PMIx_Data_array_destruct(&array);
    }
    pmix_info_t* data() { return infos_.data(); }
    size_t size() const { return infos_.size(); }

  private:
    std::vector<pmix_info_t> infos_;
};

std::string joined(const std::vector<std::string>& items, const char* sep) {
    std::string out;
    for (const auto& s : items)
        out += (out.empty() ? "" : sep) + s;
    return out;
}

// Node names for the PMIx maps: the hosts of R, made unique when several
// brokers share a host (a test instance), so that PMIx sees one node per
// shell, as the tasks' placement does.
std::vector<std::string> node_names(const ShellJob& job, const std::vector<const TaskMap::Block*>& nodes) {
    std::vector<std::string> names;
    std::map<std::string, int> seen;
    for (const auto* b : nodes)
        seen[job.host_of(b->rank)]++;
    for (const auto* b : nodes) {
        std::string host = job.host_of(b->rank);
        names.push_back(seen[host] > 1 ? fmt::format("{}-{}", host, b->rank) : host);
    }
    return names;
}

// The library's own namespace, as its clients' server URI names it.
std::string server_nspace(const ShellJob& job) {
    return fmt::format("banyan-shell.{}.{}", format_jobid(job.id), job.rank);
}

Result<void> register_namespace(const ShellJob& job, const std::string& nspace, void* hwloc_topology) {
    std::vector<const TaskMap::Block*> nodes;  // shells that run tasks
    for (const auto& b : job.map.blocks)
        if (b.ntasks > 0)
            nodes.push_back(&b);
    std::vector<std::string> names = node_names(job, nodes), ppn;
    uint32_t nodeid = 0;
    for (size_t i = 0; i < nodes.size(); i++) {
        std::vector<std::string> ranks;
        for (uint32_t t = 0; t < nodes[i]->ntasks; t++)
            ranks.push_back(std::to_string(nodes[i]->first_task + t));
        ppn.push_back(joined(ranks, ","));
        if (nodes[i]->rank == job.rank)
            nodeid = static_cast<uint32_t>(i);
    }
    char* node_regex = nullptr;
    char* proc_regex = nullptr;
    if (auto rc = PMIx_generate_regex(joined(names, ",").c_str(), &node_regex); rc != PMIX_SUCCESS)
        return pmix_error(rc, "node map");
    if (auto rc = PMIx_generate_ppn(joined(ppn, ";").c_str(), &proc_regex); rc != PMIX_SUCCESS) {
        free(node_regex);
        return pmix_error(rc, "process map");
    }
    const TaskMap::Block& local = job.local;
    std::vector<std::string> peers;
    for (uint32_t t = 0; t < local.ntasks; t++)
        peers.push_back(std::to_string(local.first_task + t));
    InfoList info;
    info.add_u32(PMIX_UNIV_SIZE, job.map.ntasks);
    info.add_u32(PMIX_JOB_SIZE, job.map.ntasks);
    info.add_u32(PMIX_MAX_PROCS, job.map.ntasks);
    info.add_u32(PMIX_APP_SIZE, job.map.ntasks);
    info.add_u32(PMIX_JOB_NUM_APPS, 1);
    info.add_u32(PMIX_APPNUM, 0);
    info.add_string(PMIX_JOBID, format_jobid(job.id));
    info.add_u32(PMIX_NUM_NODES, static_cast<uint32_t>(nodes.size()));
    info.add(PMIX_NODE_MAP, node_regex, PMIX_REGEX);
    info.add(PMIX_PROC_MAP, proc_regex, PMIX_REGEX);
    info.add_string(PMIX_NODE_LIST, joined(names, ","));
    info.add_u32(PMIX_LOCAL_SIZE, local.ntasks);
    info.add_u32(PMIX_NODE_SIZE, local.ntasks);
    info.add_string(PMIX_LOCAL_PEERS, joined(peers, ","));
    info.add_rank(PMIX_LOCALLDR, local.first_task);
    info.add_string(PMIX_HOSTNAME, names[nodeid]);
    info.add_u32(PMIX_NODEID, nodeid);
    info.add_string(PMIX_TMPDIR, job.tmpdir);
    info.add_string(PMIX_NSDIR, job.tmpdir);
    // Open MPI 4.1 loads the topology from this key (deprecated since PMIx
    // 4, which offers PMIx_Load_topology) instead of discovering the
    // machine again in every rank: ~25 ms of each MPI start here.
    char* xml = nullptr;
    int xml_length = 0;
    auto topo = static_cast<hwloc_topology_t>(hwloc_topology);
    if (topo && hwloc_topology_export_xmlbuffer(topo, &xml, &xml_length, 0) == 0) {
        info.add_string(PMIX_HWLOC_XML_V2, xml);
        hwloc_free_xmlbuffer(topo, xml);
    }
    free(node_regex);
    free(proc_regex);
    for (size_t n = 0; n < nodes.size(); n++) {
        for (uint32_t t = 0; t < nodes[n]->ntasks; t++) {
            InfoList proc;
            pmix_rank_t rank = nodes[n]->first_task + t;
            proc.add_rank(PMIX_RANK, rank);
            proc.add_u32(PMIX_APPNUM, 0);
            proc.add_rank(PMIX_GLOBAL_RANK, rank);
            proc.add_rank(PMIX_APP_RANK, rank);
            proc.add_u16(PMIX_LOCAL_RANK, static_cast<uint16_t>(t));
            proc.add_u16(PMIX_NODE_RANK, static_cast<uint16_t>(t));
            proc.add_u32(PMIX_NODEID, static_cast<uint32_t>(n));
            proc.add_string(PMIX_HOSTNAME, names[n]);
            info.add_array(PMIX_PROC_DATA, proc);
        }
    }
    Completion done;
    pmix_nspace_t ns;
    PMIX_LOAD_NSPACE(ns, nspace.c_str());
    pmix_status_t rc = done.result_of(PMIx_server_register_nspace(ns, static_cast<int>(local.ntasks), info.data(),
                                                                  info.size(), Completion::callback, &done));
    if (rc != PMIX_SUCCESS)
        return pmix_error(rc, "register namespace");
    for (uint32_t t = 0; t < local.ntasks; t++) {
        pmix_proc_t proc;
        PMIX_LOAD_PROCID(&proc, ns, local.first_task + t);
        Completion client;
        rc = client.result_of(
            PMIx_server_register_client(&proc, getuid(), getgid(), nullptr, Completion::callback, &client));
        if (rc != PMIX_SUCCESS)
            return pmix_error(rc, "register client");
    }
    return {};
}

}  // namespace

namespace {

// OpenPMIx's version ("4.2.2rc2"), as its server gives it to clients in
// PMIX_VERSION: the second word of PMIx_Get_version().
std::string library_version() {
    std::string_view text = PMIx_Get_version();
    constexpr std::string_view prefix = "OpenPMIx ";
    if (!text.starts_with(prefix))
        return "";
    text.remove_prefix(prefix.size());
    return std::string(text.substr(0, text.find_first_of(" ,")));
}

constexpr std::string_view kLoopbackUri = ";tcp4://127.0.0.1:";

// The port of a PMIx server URI on IPv4 loopback
// ("NSPACE.RANK;tcp4://127.0.0.1:PORT"), the only address the shell relays
// to (PMIX_SERVER_REMOTE_CONNECTIONS is false).
std::optional<uint16_t> uri_port(std::string_view uri) {
    size_t at = uri.find(kLoopbackUri);
    if (at == std::string_view::npos)
        return std::nullopt;
    std::string digits(uri.substr(at + kLoopbackUri.size()));
    char* end = nullptr;
    unsigned long port = std::strtoul(digits.c_str(), &end, 10);
    if (digits.empty() || *end != '\0' || port == 0 || port > 65535)
        return std::nullopt;
    return static_cast<uint16_t>(port);
}

// `variable` ("K=V") with the port of a loopback server URI replaced.
std::string with_port(const std::string& variable, uint16_t port) {
    size_t at = variable.find(kLoopbackUri);
    if (at == std::string::npos)
        return variable;
    return variable.substr(0, at + kLoopbackUri.size()) + std::to_string(port);
}

// This host's name as the library has it by default (its
// pmix_keep_fqdn_hostnames is off): up to the first dot. The shell hands
// it to the library too, so the two never differ.
std::string short_hostname() {
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    std::string name = host;
    return name.substr(0, name.find('.'));
}

bool is_server_uri(std::string_view variable) {
    return variable.starts_with("PMIX_SERVER_URI");
}

// The library's environment for `proc`, as "K=V" strings.
Result<std::vector<std::string>> library_environment(const std::string& nspace, uint32_t task) {
    pmix_proc_t proc;
    PMIX_LOAD_PROCID(&proc, nspace.c_str(), task);
    char** env = nullptr;
    if (pmix_status_t rc = PMIx_server_setup_fork(&proc, &env); rc != PMIX_SUCCESS)
        return pmix_error(rc, "setup fork");
    std::vector<std::string> out;
    for (char** e = env; e && *e; e++)
        out.emplace_back(*e);
    PMIX_ARGV_FREE(env);
    return out;
}

}  // namespace

Result<std::unique_ptr<PmixServer>> PmixServer::open(Reactor& reactor, const ShellJob& job, void* hwloc_topology,
                                                     Handlers handlers) {
    std::unique_ptr<PmixServer> server(new PmixServer(reactor, job, hwloc_topology));
    server->version_ = library_version();
    if (server->version_.empty())
        return make_error(ENOTSUP,
                          fmt::format("PMIx: cannot read the library's version from \"{}\"", PMIx_Get_version()));
    server->hostname_ = short_hostname();
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return make_error(errno, fmt::format("PMIx: socket: {}", std::strerror(errno)));
    server->listen_fd_.reset(fd);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof addr;
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, 128) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) != 0)
        return make_error(errno, fmt::format("PMIx: a loopback port for the tasks: {}", std::strerror(errno)));
    server->port_ = ntohs(addr.sin_port);
    server->nspace_ = fmt::format("banyan.{}", format_jobid(job.id));
    for (const auto& b : job.map.blocks)
        server->shared_host_ =
            server->shared_host_ || (b.rank != job.rank && b.ntasks > 0 && job.host_of(b.rank) == job.host_of(job.rank));
    auto state = std::make_shared<State>();
    state->reactor = &reactor;
    state->handlers = std::move(handlers);
    server->state_ = std::move(state);
    server->accept_watch_ = std::make_unique<FdWatcher>(reactor, fd, FdWatcher::Event::readable,
                                                        [s = server.get()] { s->on_task_connecting(); });
    return server;
}

void PmixServer::on_task_connecting() {
    for (;;) {
        UniqueFd task(accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
        if (!task && (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)) {
            // The connection stays pending: not watched again for a while,
            // or the loop would spin on it.
            log::warning("shell", "PMIx: accepting a task's connection: {}; trying again in 100 ms",
                         std::strerror(errno));
            accept_watch_.reset();
            retry_accept_.start(std::chrono::milliseconds(100), [this] {
                accept_watch_ = std::make_unique<FdWatcher>(reactor_, listen_fd_.get(), FdWatcher::Event::readable,
                                                            [this] { on_task_connecting(); });
            });
            return;
        }
        if (!task)
            return;  // none left (EAGAIN), or the task gave up
        if (!library_port_ && !library_failed_) {
            auto env = start_library();
            std::optional<uint16_t> port;
            for (const auto& e : env ? *env : std::vector<std::string>())
                if (is_server_uri(e) && !port)
                    port = uri_port(e);
            if (env && !port)
                env = make_error(EPROTO, "PMIx setup fork: no server address on IPv4 loopback for the clients");
            if (env) {
                library_port_ = port;
                check_environment(*env);
            } else {
                library_failed_ = true;
                state_->handlers.failed(env.error().message);
            }
        }
        if (!library_port_)
            continue;  // closing it fails the task's PMIx_Init
        UniqueFd library(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        addr.sin_port = htons(*library_port_);
        // Loopback: connect completes at once (the library's backlog
        // aside, which a handful of local tasks never fill).
        if (!library || connect(library.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
            log::error("shell", "PMIx: connecting a task to the library: {}", std::strerror(errno));
            continue;
        }
        // PMIx writes a header, then a body: relayed as they come, they
        // must not wait for an acknowledgement (Nagle) on either leg.
        int on = 1;
        setsockopt(task.get(), IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
        setsockopt(library.get(), IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
        std::erase_if(relays_, [](const auto& r) { return r->done(); });
        relays_.push_back(std::make_unique<SocketRelay>(reactor_, std::move(task), std::move(library)));
    }
}

Result<std::vector<std::string>> PmixServer::start_library() {
    if (g_state)
        return make_error(EBUSY, "PMIx server init: a server already runs in this process");
    static pmix_server_module_t module{};
    module.client_connected = on_client_connected;
    module.client_finalized = on_client_finalized;
    module.abort = on_abort;
    module.fence_nb = on_fence;
    module.direct_modex = on_direct_modex;
    g_state = state_;
    // The munge security plugin waits ~2 s for a munged that may not run;
    // the tasks are this shell's own children, so the native (uid) check
    // is all that is needed. The shared-memory data stores name files the
    // tasks' environment (given before the library started) cannot name.
    // Both are what the tasks' environment says: a site's own choice in
    // the broker's environment would make the two sides disagree.
    setenv("PMIX_MCA_psec", "native", 1);
    setenv("PMIX_MCA_gds", "hash", 1);
    InfoList init;
    // Several shells share a host in test instances and when jobs share a
    // node: each server keeps its rendezvous files in its own directory.
    init.add_string(PMIX_SERVER_TMPDIR, job_.tmpdir);
    init.add_string(PMIX_SYSTEM_TMPDIR, job_.tmpdir);
    init.add_bool(PMIX_SERVER_SYSTEM_SUPPORT, false);
    init.add_bool(PMIX_SERVER_REMOTE_CONNECTIONS, false);
    init.add_string(PMIX_SERVER_NSPACE, server_nspace(job_));
    init.add_rank(PMIX_SERVER_RANK, job_.rank);
    init.add_string(PMIX_HOSTNAME, hostname_);
    pmix_topology_t topology{const_cast<char*>("hwloc"), hwloc_topology_};
    if (hwloc_topology_)
        init.add(PMIX_TOPOLOGY2, &topology, PMIX_TOPO);
    if (pmix_status_t rc = PMIx_server_init(&module, init.data(), init.size()); rc != PMIX_SUCCESS) {
        g_state.reset();
        return pmix_error(rc, "server init");
    }
    if (auto r = register_namespace(job_, nspace_, hwloc_topology_); !r)
        return r.error();  // ~PmixServer finalizes
    return library_environment(nspace_, job_.local.first_task);
}

void PmixServer::check_environment(const std::vector<std::string>& library) {
    std::set<std::string> ours;
    for (const auto& e : task_environment(job_.local.first_task))
        ours.insert(is_server_uri(e) ? with_port(e, *library_port_) : e);
    for (const auto& e : library)
        if (!ours.count(e))
            log::warning("shell", "PMIx: the library sets {}, which the tasks were not given", e);
}

PmixServer::~PmixServer() {
    accept_watch_.reset();
    relays_.clear();
    if (g_state != state_)
        return;  // the library never started (or failed to)
    {
        std::lock_guard lock(state_->mutex);
        state_->stopped = true;
        for (auto& [seq, cb] : state_->fences)
            cb.first(PMIX_ERR_TIMEOUT, nullptr, 0, cb.second, nullptr, nullptr);
        state_->fences.clear();
    }
    // The library's finalize waits for its own threads: one held up (as
    // after a cancel, by a client that never lets go) held this shell,
    // its job's end and the broker's shutdown for minutes. Past
    // kFinalizeLimit the shell goes on without it; the library may still
    // call back, so its state stays, and the shell ends with _exit.
    auto done = std::make_shared<std::promise<void>>();
    std::future<void> finished = done->get_future();
    std::thread([done] {
        PMIx_server_finalize();
        done->set_value();
    }).detach();
    if (finished.wait_for(kFinalizeLimit) == std::future_status::timeout) {
        g_finalize_abandoned = true;
        log::warning("shell", "PMIx_server_finalize did not return within {} s: the shell goes on without it",
                     kFinalizeLimit.count());
        return;
    }
    g_state.reset();
}

bool pmix_finalize_abandoned() {
    return g_finalize_abandoned;
}

std::vector<std::string> PmixServer::task_environment(uint32_t task) const {
    std::string uri = fmt::format("{}.{};tcp4://127.0.0.1:{}", server_nspace(job_), job_.rank, port_);
    std::vector<std::string> out{
        "PMIX_NAMESPACE=" + nspace_,
        fmt::format("PMIX_RANK={}", task),
        "PMIX_SERVER_URI2=" + uri,
        "PMIX_SERVER_URI21=" + uri,
        "PMIX_SERVER_URI3=" + uri,
        "PMIX_SERVER_URI4=" + uri,
        "PMIX_SERVER_URI41=" + uri,
        "PMIX_SECURITY_MODE=native",
        "PMIX_GDS_MODULE=hash",
        "PMIX_BFROP_BUFFER_TYPE=PMIX_BFROP_BUFFER_NON_DESC",
        "PMIX_SERVER_TMPDIR=" + job_.tmpdir,
        "PMIX_SYSTEM_TMPDIR=" + job_.tmpdir,
        "PMIX_HOSTNAME=" + hostname_,
        "PMIX_VERSION=" + version_,
    };
    // Open MPI 4 takes a process that no launcher it knows (mpirun, Slurm,
    // Flux) started for a singleton, whatever PMIx says: without its
    // "orte" detector it asks PMIx. The shell binds the tasks itself.
    out.emplace_back("OMPI_MCA_schizo=^orte");
    out.emplace_back("OMPI_MCA_hwloc_base_binding_policy=none");
    out.emplace_back("OMPI_MCA_orte_externally_bound=1");
    // Brokers sharing a host (a test instance) run shells whose tasks have
    // the same host name, job and local ranks: Open MPI's shared-memory
    // files would collide in /dev/shm, so they go to the shell's own dir.
    if (shared_host_) {
        out.emplace_back("OMPI_MCA_btl_vader_backing_directory=" + job_.tmpdir);
        out.emplace_back("OMPI_MCA_orte_tmpdir_base=" + job_.tmpdir);
    }
    return out;
}

void PmixServer::fence_done(uint64_t seq, std::string all_data) {
    std::pair<pmix_modex_cbfunc_t, void*> cb;
    {
        std::lock_guard lock(state_->mutex);
        auto it = state_->fences.find(seq);
        if (it == state_->fences.end())
            return;
        cb = it->second;
        state_->fences.erase(it);
    }
    auto* data = new std::string(std::move(all_data));  // freed by release_fence_data
    cb.first(PMIX_SUCCESS, data->data(), data->size(), cb.second, release_fence_data, data);
}

}  // namespace banyan
