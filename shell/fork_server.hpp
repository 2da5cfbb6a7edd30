// The shell fork server (doc/spec/shell.md §1.1): a banyan-shell that the
// exec service starts once and that forks the shells of its owner's jobs,
// so that those skip the dynamic loader and the shell's start-up.
#pragma once

namespace banyan {

// Serves the exec service's requests on the SOCK_SEQPACKET socket at fd 0
// until it closes. Returns only in a forked shell: its own process group,
// the job's pipes at fds 0 and 1, nothing else of the server's open; it
// then goes on as an executed shell. The server itself never returns: it
// exits 0 when the socket closes, 2 when fd 0 is not such a socket.
// Call it before anything that starts a thread. `flag` (the argv entry
// that asked for it) is blanked in each shell, so that ps shows shells
// alike however they were started.
void serve_forks(char* flag);

}  // namespace banyan
