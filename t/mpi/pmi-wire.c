/* pmi-wire: speaks the simple PMI wire protocol (PMI-1) over PMI_FD by
 * hand, as a client library would, for t/integration/3004-pmi.sh.
 *
 *   pmi-wire exchange        put a key per rank, barrier, read every rank's
 *   pmi-wire malformed       send a line that is not cmd=NAME KEY=VALUE
 *   pmi-wire unknown         send a command the protocol does not have
 *   pmi-wire get-before-put  get a key no rank has put
 *   pmi-wire skip-barrier    rank 1 exits after init; the others wait in
 *                            the barrier
 *   pmi-wire bigput          each rank puts 8,000 values of 1,000 bytes
 *                            before the barrier
 *   pmi-wire fence BYTES     each rank puts one value of BYTES bytes (at
 *                            most 1,000), then barrier and finalize: one
 *                            fence, as an MPI library's start-up (bench/scale)
 *   pmi-wire abort           rank 0 aborts with a message of several words
 *                            and exits at once, as MPICH's PMI_Abort does
 * Prints what it learns; exits 1 on a protocol answer it did not expect. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fd;

static void send_line(const char* line) {
    size_t n = strlen(line);
    if (write(fd, line, n) != (ssize_t)n) {
        perror("pmi-wire: write");
        exit(1);
    }
}

/* One answer line, without its newline; exits when the server closes. */
static char* recv_line(void) {
    static char buf[4096];
    size_t n = 0;
    while (n + 1 < sizeof buf) {
        ssize_t r = read(fd, buf + n, 1);
        if (r <= 0) {
            fprintf(stderr, "pmi-wire: the server closed the connection\n");
            exit(1);
        }
        if (buf[n] == '\n')
            break;
        n++;
    }
    buf[n] = '\0';
    return buf;
}

/* The value of KEY= in an answer (copied), or NULL. */
static char* field(const char* answer, const char* key) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "%s=", key);
    const char* p = strstr(answer, pattern);
    if (!p)
        return NULL;
    p += strlen(pattern);
    size_t n = strcmp(key, "value") == 0 ? strlen(p) : strcspn(p, " ");
    return strndup(p, n);
}

static char* command(const char* line, const char* expect) {
    send_line(line);
    char* answer = recv_line();
    if (strncmp(answer, expect, strlen(expect)) != 0) {
        fprintf(stderr, "pmi-wire: sent %sgot '%s', expected '%s'\n", line, answer, expect);
        exit(1);
    }
    return answer;
}

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "exchange";
    const char* env_fd = getenv("PMI_FD");
    if (!env_fd) {
        fprintf(stderr, "pmi-wire: no PMI_FD\n");
        return 1;
    }
    fd = atoi(env_fd);
    int rank = atoi(getenv("PMI_RANK"));
    int size = atoi(getenv("PMI_SIZE"));
    char line[4096];

    command("cmd=init pmi_version=1 pmi_subversion=1\n", "cmd=response_to_init rc=0");
    if (strcmp(mode, "malformed") == 0) {
        send_line("this is not a command\n");
        recv_line();
        return 0;
    }
    if (strcmp(mode, "unknown") == 0) {
        send_line("cmd=frobnicate now=1\n");
        recv_line();
        return 0;
    }
    command("cmd=get_maxes\n", "cmd=maxes rc=0");
    char* kvsname = field(command("cmd=get_my_kvsname\n", "cmd=my_kvsname rc=0"), "kvsname");
    char* universe = field(command("cmd=get_universe_size\n", "cmd=universe_size rc=0"), "size");
    command("cmd=get_appnum\n", "cmd=appnum rc=0 appnum=0");
    if (strcmp(mode, "get-before-put") == 0) {
        snprintf(line, sizeof line, "cmd=get kvsname=%s key=nobody-put-this\n", kvsname);
        char* answer = command(line, "cmd=get_result");
        printf("rank %d: get before put: %s\n", rank, answer);
        return strstr(answer, "rc=0") ? 1 : 0;
    }
    if (strcmp(mode, "abort") == 0) {
        if (rank == 0) {
            send_line("cmd=abort exitcode=9 message=out of memory on this node\n");
            return 9;
        }
        pause();
        return 0;
    }
    if (strcmp(mode, "bigput") == 0) {
        char value[1001];
        memset(value, 'v', 1000);
        value[1000] = '\0';
        for (int i = 0; i < 8000; i++) {
            snprintf(line, sizeof line, "cmd=put kvsname=%s key=big-%d-%d value=%s\n", kvsname, rank, i, value);
            command(line, "cmd=put_result rc=0");
        }
        command("cmd=barrier_in\n", "cmd=barrier_out");
        return 0;
    }
    if (strcmp(mode, "fence") == 0) {
        char value[1001];
        int bytes = argc > 2 ? atoi(argv[2]) : 300;
        bytes = bytes < 1 ? 1 : bytes > 1000 ? 1000 : bytes;
        memset(value, 'c', (size_t)bytes);
        value[bytes] = '\0';
        snprintf(line, sizeof line, "cmd=put kvsname=%s key=card-%d value=%s\n", kvsname, rank, value);
        command(line, "cmd=put_result rc=0");
        command("cmd=barrier_in\n", "cmd=barrier_out");
        command("cmd=finalize\n", "cmd=finalize_ack");
        return 0;
    }
    if (strcmp(mode, "skip-barrier") == 0 && rank == 1)
        return 0; /* leaves without barrier or finalize */
    snprintf(line, sizeof line, "cmd=put kvsname=%s key=card-%d value=rank %d says hi=%d\n", kvsname, rank, rank,
             rank * 10);
    command(line, "cmd=put_result rc=0");
    command("cmd=barrier_in\n", "cmd=barrier_out");
    int seen = 0;
    for (int r = 0; r < size; r++) {
        snprintf(line, sizeof line, "cmd=get kvsname=%s key=card-%d\n", kvsname, r);
        char* value = field(command(line, "cmd=get_result rc=0"), "value");
        char expect[64];
        snprintf(expect, sizeof expect, "rank %d says hi=%d", r, r * 10);
        seen += strcmp(value, expect) == 0;
        free(value);
    }
    snprintf(line, sizeof line, "cmd=get kvsname=%s key=PMI_process_mapping\n", kvsname);
    char* mapping = field(command(line, "cmd=get_result rc=0"), "value");
    command("cmd=finalize\n", "cmd=finalize_ack");
    printf("rank %d of %d (universe %s): %d of %d keys, mapping %s\n", rank, size, universe, seen, size, mapping);
    return seen == size ? 0 : 1;
}
