// The five job profiles (doc/spec/profiling.md): cpu, futex, tcp, shm and
// file, loaded once per node by banyan-profiler and shared by every
// profiled job there. A job is found by its process tree: its shell is put
// in `tracked` (as a shell: not counted itself), every process forked from
// a tracked one is tracked with it, and each task the shell starts is the
// root of its own subtree, so counters are kept per (job, root) and the
// profiler names the rank of each root afterwards, from the shell's list.
// A process tree serves cgroup v1 and v2 alike and tells ranks apart,
// which a cgroup id (one per job and node) cannot. Hash maps are not
// preallocated: their memory is what the node's profiled jobs use.
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "profiler/profile_maps.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define AF_INET 2
#define AF_INET6 10

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __uint(max_entries, BANYAN_MAX_TRACKED);
    __type(key, __u32);  // tgid
    __type(value, struct banyan_tracked);
} tracked SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __uint(max_entries, BANYAN_MAX_TASKS);
    __type(key, struct banyan_task_key);
    __type(value, struct banyan_cpu_stats);
} cpu_stats SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __uint(max_entries, BANYAN_MAX_TASKS);
    __type(key, struct banyan_task_key);
    __type(value, struct banyan_futex_stats);
} futex_stats SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __uint(max_entries, BANYAN_MAX_CONNECTIONS);
    __type(key, struct banyan_tcp_key);
    __type(value, struct banyan_tcp_stats);
} tcp_stats SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __uint(max_entries, BANYAN_MAX_SEGMENTS);
    __type(key, struct banyan_shm_key);
    __type(value, struct banyan_shm_stats);
} shm_stats SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __uint(max_entries, BANYAN_MAX_FILES);
    __type(key, struct banyan_file_key);
    __type(value, struct banyan_file_stats);
} file_stats SEC(".maps");

// What did not fit in a full map, per program (read by the profiler).
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, BANYAN_PROGRAMS);
    __type(key, __u32);
    __type(value, __u64);
} dropped SEC(".maps");

// Per thread: since when it runs, waits on a run queue, in a futex wait,
// in a read or write; an open file's key; a socket's owner.
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __uint(max_entries, BANYAN_MAX_THREADS);
    __type(key, __u32);
    __type(value, struct banyan_running);  // (its task too: a read adds the slices running now)
} oncpu_since SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __uint(max_entries, BANYAN_MAX_THREADS);
    __type(key, __u32);
    __type(value, __u64);
} runq_since SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __uint(max_entries, BANYAN_MAX_THREADS);
    __type(key, __u32);
    __type(value, __u64);
} futex_since SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __uint(max_entries, BANYAN_MAX_THREADS);
    __type(key, __u32);
    __type(value, struct banyan_io);
} io_since SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __uint(max_entries, BANYAN_MAX_THREADS);
    __type(key, __u32);
    __type(value, struct banyan_sysv_segment);
} shmget_args SEC(".maps");

// SysV segments by shmid, for shmat (any process may attach one).
struct {
    __uint(type, BPF_MAP_TYPE_LRU_HASH);
    __uint(max_entries, BANYAN_MAX_SEGMENTS);
    __type(key, __u32);
    __type(value, struct banyan_sysv_segment);
} sysv_segments SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __uint(max_entries, BANYAN_MAX_OPEN_FILES);
    __type(key, __u64);  // struct file *
    __type(value, struct banyan_open_file);
} open_files SEC(".maps");

// open_files' value under construction: too large for the BPF stack.
struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct banyan_open_file);
} open_file_scratch SEC(".maps");

// A socket's owner, for retransmits (counted where no process is current).
struct {
    __uint(type, BPF_MAP_TYPE_LRU_HASH);
    __uint(max_entries, BANYAN_MAX_CONNECTIONS);
    __type(key, __u64);  // struct sock *
    __type(value, struct banyan_task_key);
} socket_owner SEC(".maps");

// d_path's buffer: too large for the BPF stack.
struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct banyan_file_key);
} file_key_scratch SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, char[BANYAN_PATH_SCRATCH]);
} path_scratch SEC(".maps");

static __always_inline void count_drop(__u32 program) {
    __u64* n = bpf_map_lookup_elem(&dropped, &program);
    if (n)
        __sync_fetch_and_add(n, 1);
}

// The counters of `key` in `map`, made when missing; NULL when the map is
// full (counted as dropped).
static __always_inline void* counters(void* map, const void* key, const void* zero, __u32 program) {
    void* v = bpf_map_lookup_elem(map, key);
    if (v)
        return v;
    if (bpf_map_update_elem(map, key, zero, BPF_NOEXIST) != 0 && bpf_map_lookup_elem(map, key) == 0) {
        count_drop(program);
        return 0;
    }
    return bpf_map_lookup_elem(map, key);
}

// The job and root of a counted process with `program` asked for.
// (A process of the job that runs as another user, a setuid program,
// is not counted: its files and peers are not the job's user's to see.)
static __always_inline int counted(struct task_struct* task, __u32 program, struct banyan_task_key* key) {
    __u32 tgid = BPF_CORE_READ(task, tgid);
    struct banyan_tracked* t = bpf_map_lookup_elem(&tracked, &tgid);
    if (!t || (t->flags & BANYAN_TRACKED_SHELL) || !(t->programs & (1u << program)) ||
        BPF_CORE_READ(task, cred, euid.val) != t->uid)
        return 0;
    key->job = t->job;
    key->root = t->root;
    key->pad = 0;
    return 1;
}

static __always_inline int current_counted(__u32 program, struct banyan_task_key* key) {
    return counted((struct task_struct*)bpf_get_current_task(), program, key);
}

// --- process tree: always attached while any job is profiled ------------

SEC("tp_btf/sched_process_fork")
int BPF_PROG(track_fork, struct task_struct* parent, struct task_struct* child) {
    __u32 parent_tgid = BPF_CORE_READ(parent, tgid);
    __u32 child_pid = BPF_CORE_READ(child, pid), child_tgid = BPF_CORE_READ(child, tgid);
    if (child_pid != child_tgid)
        return 0;  // a thread: its process is tracked already
    struct banyan_tracked* p = bpf_map_lookup_elem(&tracked, &parent_tgid);
    if (!p)
        return 0;
    struct banyan_tracked c = *p;
    c.flags &= ~BANYAN_TRACKED_SHELL;
    if (p->flags & BANYAN_TRACKED_SHELL)
        c.root = child_tgid;  // forked by the shell: a task (or a helper of the shell)
    if (bpf_map_update_elem(&tracked, &child_tgid, &c, BPF_ANY) != 0)
        count_drop(BANYAN_PROGRAMS - 1);
    return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(track_exit, struct task_struct* p) {
    static const struct banyan_cpu_stats zero;
    __u32 tid = BPF_CORE_READ(p, pid), tgid = BPF_CORE_READ(p, tgid);
    // Its last slice on a CPU, which no switch will count: it ends here.
    struct banyan_task_key key;
    struct banyan_running* running = bpf_map_lookup_elem(&oncpu_since, &tid);
    if (running && counted(p, BANYAN_PROGRAM_CPU, &key)) {
        __u64 now = bpf_ktime_get_ns();
        struct banyan_cpu_stats* s = counters(&cpu_stats, &key, &zero, BANYAN_PROGRAM_CPU);
        if (s && now > running->since)
            __sync_fetch_and_add(&s->oncpu_ns, now - running->since);
    }
    bpf_map_delete_elem(&oncpu_since, &tid);
    bpf_map_delete_elem(&runq_since, &tid);
    bpf_map_delete_elem(&futex_since, &tid);
    bpf_map_delete_elem(&io_since, &tid);
    bpf_map_delete_elem(&shmget_args, &tid);
    // The last thread of the process: its pid may be reused by anyone.
    if (BPF_CORE_READ(p, signal, live.counter) == 0)
        bpf_map_delete_elem(&tracked, &tgid);
    return 0;
}

// --- cpu: on-CPU time, run-queue wait, switches and migrations ---------

static __always_inline void runnable(struct task_struct* p) {
    struct banyan_task_key key;
    if (!counted(p, BANYAN_PROGRAM_CPU, &key))
        return;
    __u32 tid = BPF_CORE_READ(p, pid);
    __u64 now = bpf_ktime_get_ns();
    bpf_map_update_elem(&runq_since, &tid, &now, BPF_ANY);
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(cpu_wakeup, struct task_struct* p) {
    runnable(p);
    return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(cpu_wakeup_new, struct task_struct* p) {
    runnable(p);
    return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(cpu_switch, bool preempt, struct task_struct* prev, struct task_struct* next, unsigned int prev_state) {
    static const struct banyan_cpu_stats zero;
    __u64 now = bpf_ktime_get_ns();
    struct banyan_task_key key;
    if (counted(prev, BANYAN_PROGRAM_CPU, &key)) {
        __u32 tid = BPF_CORE_READ(prev, pid);
        struct banyan_cpu_stats* s = counters(&cpu_stats, &key, &zero, BANYAN_PROGRAM_CPU);
        struct banyan_running* running = bpf_map_lookup_elem(&oncpu_since, &tid);
        if (s) {
            if (running && now > running->since)
                __sync_fetch_and_add(&s->oncpu_ns, now - running->since);
            __sync_fetch_and_add(&s->switches, 1);
        }
        bpf_map_delete_elem(&oncpu_since, &tid);
        if (prev_state == 0)  // preempted, still runnable: it waits from now
            bpf_map_update_elem(&runq_since, &tid, &now, BPF_ANY);
    }
    if (counted(next, BANYAN_PROGRAM_CPU, &key)) {
        __u32 tid = BPF_CORE_READ(next, pid);
        struct banyan_running running = {.since = now, .key = key};
        bpf_map_update_elem(&oncpu_since, &tid, &running, BPF_ANY);
        __u64* since = bpf_map_lookup_elem(&runq_since, &tid);
        if (since) {
            struct banyan_cpu_stats* s = counters(&cpu_stats, &key, &zero, BANYAN_PROGRAM_CPU);
            if (s && now > *since)
                __sync_fetch_and_add(&s->runq_ns, now - *since);
            bpf_map_delete_elem(&runq_since, &tid);
        }
    }
    return 0;
}

SEC("tp_btf/sched_migrate_task")
int BPF_PROG(cpu_migrate, struct task_struct* p, int dest_cpu) {
    static const struct banyan_cpu_stats zero;
    struct banyan_task_key key;
    if (!counted(p, BANYAN_PROGRAM_CPU, &key))
        return 0;
    struct banyan_cpu_stats* s = counters(&cpu_stats, &key, &zero, BANYAN_PROGRAM_CPU);
    if (s)
        __sync_fetch_and_add(&s->migrations, 1);
    return 0;
}

// --- futex: waits and how long, as a log2 histogram ---------------------

#define FUTEX_WAIT 0
#define FUTEX_LOCK_PI 6
#define FUTEX_WAIT_BITSET 9
#define FUTEX_WAIT_REQUEUE_PI 11
#define FUTEX_LOCK_PI2 13
#define FUTEX_CMD_MASK (~(128 | 256))

SEC("tracepoint/syscalls/sys_enter_futex")
int futex_enter(struct trace_event_raw_sys_enter* ctx) {
    struct banyan_task_key key;
    if (!current_counted(BANYAN_PROGRAM_FUTEX, &key))
        return 0;
    int cmd = (int)ctx->args[1] & FUTEX_CMD_MASK;
    if (cmd != FUTEX_WAIT && cmd != FUTEX_WAIT_BITSET && cmd != FUTEX_LOCK_PI && cmd != FUTEX_LOCK_PI2 &&
        cmd != FUTEX_WAIT_REQUEUE_PI)
        return 0;
    __u32 tid = (__u32)bpf_get_current_pid_tgid();
    __u64 now = bpf_ktime_get_ns();
    bpf_map_update_elem(&futex_since, &tid, &now, BPF_ANY);
    return 0;
}

SEC("tracepoint/syscalls/sys_exit_futex")
int futex_exit(struct trace_event_raw_sys_exit* ctx) {
    static const struct banyan_futex_stats zero;
    __u32 tid = (__u32)bpf_get_current_pid_tgid();
    __u64* since = bpf_map_lookup_elem(&futex_since, &tid);
    if (!since)
        return 0;
    __u64 waited = bpf_ktime_get_ns() - *since;
    bpf_map_delete_elem(&futex_since, &tid);
    struct banyan_task_key key;
    if (!current_counted(BANYAN_PROGRAM_FUTEX, &key))
        return 0;
    struct banyan_futex_stats* s = counters(&futex_stats, &key, &zero, BANYAN_PROGRAM_FUTEX);
    if (!s)
        return 0;
    __sync_fetch_and_add(&s->waits, 1);
    __sync_fetch_and_add(&s->wait_ns, waited);
    __u64 us = waited / 1000;
    __u32 slot = 0;
#pragma unroll
    for (int i = 0; i < BANYAN_FUTEX_SLOTS - 1; i++)
        if (us >> (i + 1))
            slot = i + 1;
    if (slot < BANYAN_FUTEX_SLOTS)
        __sync_fetch_and_add(&s->hist[slot], 1);
    return 0;
}

// --- helpers of tcp, shm and file: syscall tracepoints and tp_btf only
// (no fentry or kprobe: kernels without trampolines or kprobes, this
// project's test machine among them, load these too) ---------------------

// The current process's open file at `fd`, or NULL.
static __always_inline struct file* file_of_fd(long fd) {
    struct task_struct* task = (struct task_struct*)bpf_get_current_task();
    struct fdtable* fdt = BPF_CORE_READ(task, files, fdt);
    unsigned int max = BPF_CORE_READ(fdt, max_fds);
    if (fd < 0 || fd >= max)
        return 0;
    struct file** fds = BPF_CORE_READ(fdt, fd);
    struct file* f = 0;
    bpf_probe_read_kernel(&f, sizeof f, &fds[fd]);
    return f;
}

static __always_inline int starts_with(const char* s, const char* prefix, int n) {
    for (int i = 0; i < n; i++)
        if (s[i] != prefix[i])
            return 0;
    return 1;
}

// --- tcp: bytes, retransmits and connections per connection -------------

#define IPPROTO_TCP 6
#define MSG_PEEK 2
#define TCP_ESTABLISHED 1
#define TCP_SYN_SENT 2

static __always_inline int is_tcp(const struct sock* sk) {
    __u16 family = BPF_CORE_READ(sk, __sk_common.skc_family);
    return (family == AF_INET || family == AF_INET6) && BPF_CORE_READ(sk, sk_protocol) == IPPROTO_TCP;
}

static __always_inline void tcp_key_of(const struct sock* sk, const struct banyan_task_key* owner,
                                       struct banyan_tcp_key* k) {
    __builtin_memset(k, 0, sizeof *k);
    k->job = owner->job;
    k->root = owner->root;
    k->family = BPF_CORE_READ(sk, __sk_common.skc_family);
    k->local_port = BPF_CORE_READ(sk, __sk_common.skc_num);
    k->remote_port = __builtin_bswap16(BPF_CORE_READ(sk, __sk_common.skc_dport));
    if (k->family == AF_INET) {
        // (Through a __u32: BPF_CORE_READ_INTO reads the size of what
        // its destination points to.)
        BPF_CORE_READ_INTO((__u32*)k->local_addr, sk, __sk_common.skc_rcv_saddr);
        BPF_CORE_READ_INTO((__u32*)k->remote_addr, sk, __sk_common.skc_daddr);
    } else {
        BPF_CORE_READ_INTO(&k->local_addr, sk, __sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8);
        BPF_CORE_READ_INTO(&k->remote_addr, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr8);
    }
}

// The counters of `sk` for `owner`, who is using it now.
static __always_inline struct banyan_tcp_stats* tcp_counters(const struct sock* sk,
                                                             const struct banyan_task_key* owner) {
    static const struct banyan_tcp_stats zero;
    struct banyan_tcp_key k;
    __u64 ptr = (__u64)sk;
    bpf_map_update_elem(&socket_owner, &ptr, owner, BPF_ANY);
    tcp_key_of(sk, owner, &k);
    return counters(&tcp_stats, &k, &zero, BANYAN_PROGRAM_TCP);
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(tcp_sent, struct sock* sk, int ret, int flags) {
    struct banyan_task_key owner;
    if (ret <= 0 || !is_tcp(sk) || !current_counted(BANYAN_PROGRAM_TCP, &owner))
        return 0;
    struct banyan_tcp_stats* s = tcp_counters(sk, &owner);
    if (s)
        __sync_fetch_and_add(&s->sent, ret);
    return 0;
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(tcp_received, struct sock* sk, int ret, int flags) {
    struct banyan_task_key owner;
    if (ret <= 0 || (flags & MSG_PEEK) || !is_tcp(sk) || !current_counted(BANYAN_PROGRAM_TCP, &owner))
        return 0;
    struct banyan_tcp_stats* s = tcp_counters(sk, &owner);
    if (s)
        __sync_fetch_and_add(&s->received, ret);
    return 0;
}

// A connect: SYN_SENT is set by the connecting process (its owner, then);
// ESTABLISHED comes later, where no process is current, with the ports.
SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(tcp_state, const struct sock* sk, const int oldstate, const int newstate) {
    __u64 ptr = (__u64)sk;
    if (newstate == TCP_SYN_SENT) {
        struct banyan_task_key owner;
        if (is_tcp(sk) && current_counted(BANYAN_PROGRAM_TCP, &owner))
            bpf_map_update_elem(&socket_owner, &ptr, &owner, BPF_ANY);
        return 0;
    }
    if (oldstate != TCP_SYN_SENT || newstate != TCP_ESTABLISHED)
        return 0;
    struct banyan_task_key* owner = bpf_map_lookup_elem(&socket_owner, &ptr);
    if (!owner)
        return 0;
    static const struct banyan_tcp_stats zero;
    struct banyan_tcp_key k;
    tcp_key_of(sk, owner, &k);
    struct banyan_tcp_stats* s = counters(&tcp_stats, &k, &zero, BANYAN_PROGRAM_TCP);
    if (s)
        __sync_fetch_and_add(&s->connects, 1);
    return 0;
}

static __always_inline void accepted(long fd) {
    struct banyan_task_key owner;
    if (fd < 0 || !current_counted(BANYAN_PROGRAM_TCP, &owner))
        return;
    struct file* f = file_of_fd(fd);
    if (!f)
        return;
    struct socket* sock = BPF_CORE_READ(f, private_data);
    struct sock* sk = BPF_CORE_READ(sock, sk);
    if (!sk || !is_tcp(sk))
        return;
    struct banyan_tcp_stats* s = tcp_counters(sk, &owner);
    if (s)
        __sync_fetch_and_add(&s->accepts, 1);
}

SEC("tracepoint/syscalls/sys_exit_accept")
int tcp_accept_exit(struct trace_event_raw_sys_exit* ctx) {
    accepted(ctx->ret);
    return 0;
}

SEC("tracepoint/syscalls/sys_exit_accept4")
int tcp_accept4_exit(struct trace_event_raw_sys_exit* ctx) {
    accepted(ctx->ret);
    return 0;
}

SEC("tp_btf/tcp_retransmit_skb")
int BPF_PROG(tcp_retransmitted, const struct sock* sk) {
    __u64 ptr = (__u64)sk;
    struct banyan_task_key* owner = bpf_map_lookup_elem(&socket_owner, &ptr);
    if (!owner)
        return 0;
    struct banyan_tcp_key k;
    tcp_key_of(sk, owner, &k);
    struct banyan_tcp_stats* s = bpf_map_lookup_elem(&tcp_stats, &k);  // only a connection counted already
    if (s)
        __sync_fetch_and_add(&s->retransmits, 1);
    return 0;
}

// --- shm: /dev/shm and SysV segments opened and mapped -----------------

#define TMPFS_MAGIC 0x01021994

static __always_inline struct banyan_shm_stats* shm_counters(const struct banyan_task_key* owner, const char* name,
                                                             int user_memory) {
    static const struct banyan_shm_stats zero;
    struct banyan_shm_key k;
    __builtin_memset(&k, 0, sizeof k);
    k.job = owner->job;
    k.root = owner->root;
    if (user_memory)
        bpf_probe_read_user_str(k.name, sizeof k.name, name);
    else
        bpf_probe_read_kernel_str(k.name, sizeof k.name, name);
    return counters(&shm_stats, &k, &zero, BANYAN_PROGRAM_SHM);
}

// "SYSV" and the key in 8 hex digits, the name the kernel gives the
// segment's file; a private segment (key 0) "shmid" and its id, since
// all of them share that key.
static __always_inline void sysv_name(__u32 key, __u32 shmid, char name[16]) {
    __u32 n = key ? key : shmid;
    int at = 4;
    if (key) {
        name[0] = 'S', name[1] = 'Y', name[2] = 'S', name[3] = 'V';
    } else {
        name[0] = 's', name[1] = 'h', name[2] = 'm', name[3] = 'i', name[4] = 'd';
        at = 5;
    }
#pragma unroll
    for (int i = 0; i < 8; i++) {
        __u32 nibble = (n >> (28 - 4 * i)) & 0xf;
        name[at + i] = nibble < 10 ? '0' + nibble : 'a' + nibble - 10;
    }
    name[at + 8] = 0;
}

// SysV: shmget(key, size, flags) -> shmid.
SEC("tracepoint/syscalls/sys_enter_shmget")
int shm_get_enter(struct trace_event_raw_sys_enter* ctx) {
    struct banyan_task_key owner;
    if (!current_counted(BANYAN_PROGRAM_SHM, &owner))
        return 0;
    __u32 tid = (__u32)bpf_get_current_pid_tgid();
    struct banyan_sysv_segment segment = {.key = (__u32)ctx->args[0], .size = ctx->args[1]};
    bpf_map_update_elem(&shmget_args, &tid, &segment, BPF_ANY);
    return 0;
}

SEC("tracepoint/syscalls/sys_exit_shmget")
int shm_get_exit(struct trace_event_raw_sys_exit* ctx) {
    __u32 tid = (__u32)bpf_get_current_pid_tgid();
    struct banyan_sysv_segment* args = bpf_map_lookup_elem(&shmget_args, &tid);
    if (!args)
        return 0;
    struct banyan_sysv_segment segment = *args;
    bpf_map_delete_elem(&shmget_args, &tid);
    struct banyan_task_key owner;
    if (ctx->ret < 0 || !current_counted(BANYAN_PROGRAM_SHM, &owner))
        return 0;
    __u32 shmid = (__u32)ctx->ret;
    bpf_map_update_elem(&sysv_segments, &shmid, &segment, BPF_ANY);
    char name[16];
    sysv_name(segment.key, shmid, name);
    struct banyan_shm_stats* s = shm_counters(&owner, name, 0);
    if (!s)
        return 0;
    __sync_fetch_and_add(&s->opens, 1);
    if (segment.size > s->size)
        s->size = segment.size;
    s->sysv = 1;
    return 0;
}

SEC("tracepoint/syscalls/sys_enter_shmat")
int shm_at_enter(struct trace_event_raw_sys_enter* ctx) {
    struct banyan_task_key owner;
    if (!current_counted(BANYAN_PROGRAM_SHM, &owner))
        return 0;
    __u32 shmid = (__u32)ctx->args[0];
    struct banyan_sysv_segment* segment = bpf_map_lookup_elem(&sysv_segments, &shmid);
    struct banyan_sysv_segment unknown = {.key = 0, .size = 0};
    char name[16];
    sysv_name(segment ? segment->key : unknown.key, shmid, name);
    struct banyan_shm_stats* s = shm_counters(&owner, name, 0);
    if (!s)
        return 0;
    __sync_fetch_and_add(&s->maps, 1);
    if (segment)
        __sync_fetch_and_add(&s->mapped_bytes, segment->size);
    s->sysv = 1;
    return 0;
}

// POSIX: shm_open is an open under /dev/shm; mmap of a tmpfs file maps it.
static __always_inline void shm_opened(const char* user_path) {
    struct banyan_task_key owner;
    if (!current_counted(BANYAN_PROGRAM_SHM, &owner))
        return;
    char head[10] = {};
    bpf_probe_read_user(head, 9, user_path);
    if (!starts_with(head, "/dev/shm/", 9))
        return;
    struct banyan_shm_stats* s = shm_counters(&owner, user_path + 9, 1);
    if (s)
        __sync_fetch_and_add(&s->opens, 1);
}

SEC("tracepoint/syscalls/sys_enter_openat")
int shm_openat(struct trace_event_raw_sys_enter* ctx) {
    shm_opened((const char*)ctx->args[1]);
    return 0;
}

SEC("tracepoint/syscalls/sys_enter_open")
int shm_open(struct trace_event_raw_sys_enter* ctx) {
    shm_opened((const char*)ctx->args[0]);
    return 0;
}

SEC("tracepoint/syscalls/sys_enter_mmap")
int shm_mmap(struct trace_event_raw_sys_enter* ctx) {
    struct banyan_task_key owner;
    long fd = (long)ctx->args[4];
    if (fd < 0 || !current_counted(BANYAN_PROGRAM_SHM, &owner))
        return 0;
    struct file* f = file_of_fd(fd);
    if (!f || BPF_CORE_READ(f, f_inode, i_sb, s_magic) != TMPFS_MAGIC)
        return 0;
    const unsigned char* dname = BPF_CORE_READ(f, f_path.dentry, d_name.name);
    struct banyan_shm_stats* s = shm_counters(&owner, (const char*)dname, 0);
    if (!s)
        return 0;
    __sync_fetch_and_add(&s->maps, 1);
    __sync_fetch_and_add(&s->mapped_bytes, ctx->args[1]);
    __u64 size = BPF_CORE_READ(f, f_inode, i_size);
    if (size > s->size)
        s->size = size;
    return 0;
}

// --- file: opens, reads and writes by file system and path --------------

#define PATH_DEPTH 16
#define COMPONENT_MAX 64

// The file's path from the root of its mount namespace, into `out`
// (BANYAN_PATH_SCRATCH bytes; what does not fit is cut).
static __always_inline void path_of(struct file* f, char* out) {
    struct dentry* d = BPF_CORE_READ(f, f_path.dentry);
    struct vfsmount* vfsmnt = BPF_CORE_READ(f, f_path.mnt);
    struct mount* mnt = (struct mount*)((char*)vfsmnt - bpf_core_field_offset(struct mount, mnt));
    const unsigned char* names[PATH_DEPTH] = {};
    int n = 0;
#pragma unroll
    for (int i = 0; i < PATH_DEPTH + 4; i++) {
        struct dentry* parent = BPF_CORE_READ(d, d_parent);
        if (d == BPF_CORE_READ(mnt, mnt.mnt_root)) {  // the top of a mount: on to where it is mounted
            struct mount* up = BPF_CORE_READ(mnt, mnt_parent);
            if (up == mnt)
                break;
            d = BPF_CORE_READ(mnt, mnt_mountpoint);
            mnt = up;
            continue;
        }
        if (d == parent || n >= PATH_DEPTH)
            break;
        names[n++ & (PATH_DEPTH - 1)] = BPF_CORE_READ(d, d_name.name);
        d = parent;
    }
    __u32 off = 0;
#pragma unroll
    for (int i = PATH_DEPTH - 1; i >= 0; i--) {
        if (i >= n || off > BANYAN_PATH_LEN)
            continue;
        // (Opaque to the compiler first: it would drop the masks, which
        // the verifier needs to see.)
        barrier_var(off);
        __u32 at = off & (BANYAN_PATH_SCRATCH / 2 - 1);
        out[at] = '/';
        __u32 next = off + 1;
        barrier_var(next);
        at = next & (BANYAN_PATH_SCRATCH / 2 - 1);
        long len = bpf_probe_read_kernel_str(out + at, COMPONENT_MAX, names[i]);
        off += len > 1 ? len : 1;
    }
    if (off == 0)
        out[off++] = '/';
    barrier_var(off);
    out[off & (BANYAN_PATH_SCRATCH / 2 - 1)] = 0;
}

static __always_inline void file_opened(long fd) {
    static const struct banyan_file_stats zero;
    struct banyan_task_key owner;
    if (fd < 0 || !current_counted(BANYAN_PROGRAM_FILE, &owner))
        return;
    struct file* f = file_of_fd(fd);
    __u32 zero_index = 0;
    struct banyan_file_key* k = bpf_map_lookup_elem(&file_key_scratch, &zero_index);
    char* path = bpf_map_lookup_elem(&path_scratch, &zero_index);
    if (!f || !k || !path)
        return;
    __builtin_memset(k, 0, sizeof *k);
    k->job = owner.job;
    k->root = owner.root;
    const char* fs = BPF_CORE_READ(f, f_inode, i_sb, s_type, name);
    bpf_probe_read_kernel_str(k->fs, sizeof k->fs, fs);
    path_of(f, path);
    bpf_probe_read_kernel_str(k->path, sizeof k->path, path);
    struct banyan_file_stats* s = counters(&file_stats, k, &zero, BANYAN_PROGRAM_FILE);
    if (!s)
        return;
    __sync_fetch_and_add(&s->opens, 1);
    struct banyan_open_file* open = bpf_map_lookup_elem(&open_file_scratch, &zero_index);
    if (!open)
        return;
    open->inode = (__u64)BPF_CORE_READ(f, f_inode);
    open->key = *k;
    __u64 ptr = (__u64)f;
    if (bpf_map_update_elem(&open_files, &ptr, open, BPF_ANY) != 0)
        count_drop(BANYAN_PROGRAM_FILE);
}

SEC("tracepoint/syscalls/sys_exit_openat")
int file_openat_exit(struct trace_event_raw_sys_exit* ctx) {
    file_opened(ctx->ret);
    return 0;
}

SEC("tracepoint/syscalls/sys_exit_openat2")
int file_openat2_exit(struct trace_event_raw_sys_exit* ctx) {
    file_opened(ctx->ret);
    return 0;
}

SEC("tracepoint/syscalls/sys_exit_open")
int file_open_exit(struct trace_event_raw_sys_exit* ctx) {
    file_opened(ctx->ret);
    return 0;
}

// A file's references: f_ref (a file_ref_t, 0 for one) from 6.13, f_count
// before. Both layouts declared here, so that the object builds against
// either kernel's vmlinux.h.
struct file_ref___new {
    atomic_long_t refcnt;
} __attribute__((preserve_access_index));
struct file___new {
    struct file_ref___new f_ref;
} __attribute__((preserve_access_index));
struct file___old {
    atomic_long_t f_count;
} __attribute__((preserve_access_index));

static __always_inline int last_reference(struct file* f) {
    struct file___new* now = (struct file___new*)f;
    if (bpf_core_field_exists(now->f_ref))
        return BPF_CORE_READ(now, f_ref.refcnt.counter) <= 0;
    return BPF_CORE_READ((struct file___old*)f, f_count.counter) <= 1;
}

SEC("tracepoint/syscalls/sys_enter_close")
int file_close(struct trace_event_raw_sys_enter* ctx) {
    struct banyan_task_key owner;
    if (!current_counted(BANYAN_PROGRAM_FILE, &owner))
        return 0;
    struct file* f = file_of_fd((long)ctx->args[0]);
    __u64 ptr = (__u64)f;
    // (Only the last reference frees it; a dup'ed one stays counted.)
    if (f && last_reference(f))
        bpf_map_delete_elem(&open_files, &ptr);
    return 0;
}

static __always_inline void io_begin(long fd, __u32 is_write) {
    struct banyan_task_key owner;
    if (!current_counted(BANYAN_PROGRAM_FILE, &owner))
        return;
    struct file* f = file_of_fd(fd);
    __u64 ptr = (__u64)f;
    struct banyan_open_file* open = f ? bpf_map_lookup_elem(&open_files, &ptr) : 0;
    // (A struct file freed without a close of ours and reused, for a pipe
    // or a socket or by another job, is not the file counted.)
    if (!open || open->inode != (__u64)BPF_CORE_READ(f, f_inode) || open->key.job != owner.job)
        return;
    __u32 tid = (__u32)bpf_get_current_pid_tgid();
    struct banyan_io io = {.file = ptr, .since = bpf_ktime_get_ns(), .is_write = is_write};
    bpf_map_update_elem(&io_since, &tid, &io, BPF_ANY);
}

static __always_inline void io_end(long ret) {
    __u32 tid = (__u32)bpf_get_current_pid_tgid();
    struct banyan_io* io = bpf_map_lookup_elem(&io_since, &tid);
    if (!io)
        return;
    __u64 took = bpf_ktime_get_ns() - io->since, ptr = io->file;
    __u32 is_write = io->is_write;
    bpf_map_delete_elem(&io_since, &tid);
    struct banyan_open_file* open = bpf_map_lookup_elem(&open_files, &ptr);
    if (!open)
        return;
    struct banyan_file_stats* s = bpf_map_lookup_elem(&file_stats, &open->key);
    if (!s)
        return;
    if (is_write) {
        __sync_fetch_and_add(&s->writes, 1);
        __sync_fetch_and_add(&s->write_ns, took);
        if (ret > 0)
            __sync_fetch_and_add(&s->write_bytes, ret);
    } else {
        __sync_fetch_and_add(&s->reads, 1);
        __sync_fetch_and_add(&s->read_ns, took);
        if (ret > 0)
            __sync_fetch_and_add(&s->read_bytes, ret);
    }
}

#define IO_SYSCALL(name, is_write)                                      \
    SEC("tracepoint/syscalls/sys_enter_" #name)                         \
    int file_##name##_enter(struct trace_event_raw_sys_enter* ctx) {    \
        io_begin((long)ctx->args[0], is_write);                         \
        return 0;                                                       \
    }                                                                   \
    SEC("tracepoint/syscalls/sys_exit_" #name)                          \
    int file_##name##_exit(struct trace_event_raw_sys_exit* ctx) {      \
        io_end(ctx->ret);                                               \
        return 0;                                                       \
    }

IO_SYSCALL(read, 0)
IO_SYSCALL(pread64, 0)
IO_SYSCALL(readv, 0)
IO_SYSCALL(write, 1)
IO_SYSCALL(pwrite64, 1)
IO_SYSCALL(writev, 1)
