// The holder of a job's container (`banyan-shell --container`, doc/spec/
// shell.md §9): started by the job's shell, as the job's user, it prepares
// the image, makes the container's mount namespace (and user namespace,
// unless it runs as root) with the image as its root and the job's
// directories bound in, answers, and then holds the namespaces until its
// stdin closes. The shell's tasks join them (setns) and so run inside.
#pragma once

namespace banyan {

// The mode's main: one JSON line on stdin (ContainerSpec of
// shell/container.hpp), one JSON line on stdout: {"program": PATH}, the
// command as the container's PATH finds it, or {"error": "..."}.
int run_container_holder();

}  // namespace banyan
