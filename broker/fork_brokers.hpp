// `banyan-broker --fork-brokers PAD`: the brokers of a test instance forked
// from one loaded broker (doc/spec/overlay.md §12).
#pragma once

namespace banyan {

// Serves `banyan start` on descriptor 3 (a SOCK_SEQPACKET socket): each
// message is one broker's arguments, each ended by a NUL; each answer is
// the int32 pid of a forked broker, with its pidfd (or -errno, none). The
// forked broker is `banyan start`'s child. Returns only in a forked
// broker, with `argc` and `argv` now its own arguments (written over this
// process's, which the padding argument made long enough, so /proc/PID/
// cmdline shows them); exits when `banyan start` closes the socket.
void serve_broker_forks(int& argc, char**& argv);

}  // namespace banyan
