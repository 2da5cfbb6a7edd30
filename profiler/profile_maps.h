/* The maps banyan-profiler and its BPF programs share (profile.bpf.c):
 * C for both sides. The sizes bound the memory of the maps per node; the
 * hash maps are not preallocated, so they hold what the node's profiled
 * jobs use (doc/spec/profiling.md §4). */
#ifndef BANYAN_PROFILE_MAPS_H
#define BANYAN_PROFILE_MAPS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define BANYAN_PROGRAM_CPU 0
#define BANYAN_PROGRAM_FUTEX 1
#define BANYAN_PROGRAM_TCP 2
#define BANYAN_PROGRAM_SHM 3
#define BANYAN_PROGRAM_FILE 4
#define BANYAN_PROGRAMS 6 /* the five, and the process tree (last) */

#define BANYAN_MAX_TRACKED 65536     /* processes of profiled jobs */
#define BANYAN_MAX_THREADS 65536     /* threads in a wait at once */
#define BANYAN_MAX_TASKS 16384       /* (job, task) pairs */
#define BANYAN_MAX_CONNECTIONS 16384 /* TCP connections */
#define BANYAN_MAX_SEGMENTS 4096     /* shared-memory segments */
#define BANYAN_MAX_FILES 16384       /* (job, task, path) */
#define BANYAN_MAX_OPEN_FILES 65536
#define BANYAN_FUTEX_SLOTS 32 /* log2 of the wait in microseconds */
#define BANYAN_NAME_LEN 64
#define BANYAN_PATH_LEN 128
#define BANYAN_PATH_SCRATCH 512

#define BANYAN_TRACKED_SHELL 1 /* the job's shell: not counted; its children are roots */

struct banyan_tracked {
    __u64 job;
    __u32 root;     /* the task (child of the shell) this process descends from */
    __u16 flags;
    __u16 programs; /* 1 << BANYAN_PROGRAM_* */
    __u32 uid;      /* the job's user: a process that runs as another (setuid) is not counted */
    __u32 pad;
};


struct banyan_task_key {
    __u64 job;
    __u32 root;
    __u32 pad;
};

struct banyan_running { /* a thread on a CPU now, since when */
    __u64 since;
    struct banyan_task_key key;
};

struct banyan_cpu_stats {
    __u64 oncpu_ns, runq_ns, switches, migrations;
};

struct banyan_futex_stats {
    __u64 waits, wait_ns;
    __u64 hist[BANYAN_FUTEX_SLOTS];
};

struct banyan_tcp_key {
    __u64 job;
    __u32 root;
    __u16 family;
    __u16 local_port, remote_port;
    __u16 pad[3];
    __u8 local_addr[16], remote_addr[16]; /* IPv4: the first 4 bytes */
};

struct banyan_tcp_stats {
    __u64 sent, received, retransmits, connects, accepts;
};

struct banyan_shm_key {
    __u64 job;
    __u32 root;
    __u32 pad;
    char name[BANYAN_NAME_LEN]; /* the file's name in /dev/shm, or SYSV<key> */
};

struct banyan_shm_stats {
    __u64 opens, maps, mapped_bytes, size;
    __u64 sysv;
};

struct banyan_file_key {
    __u64 job;
    __u32 root;
    __u32 pad;
    char fs[16];
    char path[BANYAN_PATH_LEN];
};

struct banyan_sysv_segment {
    __u64 key; /* its IPC key */
    __u64 size;
};

struct banyan_io { /* a read or write under way */
    __u64 file, since;
    __u32 is_write, pad;
};

struct banyan_open_file { /* a file a counted process opened */
    __u64 inode;          /* its inode: a struct file reused for another is not this one */
    struct banyan_file_key key;
};

struct banyan_file_stats {
    __u64 opens, reads, read_bytes, read_ns, writes, write_bytes, write_ns;
};

#endif
