// A broker that is a container's PID 1 (started without tini in front of
// it) inherits every orphan of the container and must reap them, or they
// stay <defunct>. It splits in two: PID 1 stays a minimal init that
// forwards signals to the broker, its one child, reaps whatever ends, and
// exits with the broker's status.
#pragma once

namespace banyan {

// Returns at once unless this process is PID 1; then returns only in the
// child (the broker), while PID 1 never returns. If fork fails, returns
// and the broker runs as PID 1 unsplit (orphans then stay unreaped).
void become_init_if_pid1();

}  // namespace banyan
