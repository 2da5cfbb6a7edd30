#!/bin/bash
# A PMIx server library whose finalize never returns (an LD_PRELOAD shim,
# as a shell after a cancel met it): the shell waits for it 5 s at most,
# the job still ends with its status, and the instance shuts down at once
# (doc/spec/shell.md §4.3). Unbounded, the job and the shutdown hung.
. "$(dirname "$0")/../integration/lib.sh"
need_cores 2 "two MPI ranks on one node"

MPI_DIR=${BANYAN_MPI_DIR:-}
[ -n "$MPI_DIR" ] && [ -x "$MPI_DIR/mpi-hello" ] || { echo "the MPI test programs are not built"; exit "$SKIP_CODE"; }
[ -f "${BANYAN_HANG_PMIX:-}" ] || { echo "the hang-pmix-finalize shim is not built"; exit "$SKIP_CODE"; }

start=$SECONDS
LD_PRELOAD=$BANYAN_HANG_PMIX timeout 120 banyan start --test-size=1 \
    banyan run -n2 -o pmi=pmix "$MPI_DIR/mpi-hello" >"$T_DIR/out" 2>&1
status=$?
took=$((SECONDS - start))
sed 's/^/    | /' "$T_DIR/out"
check "the job ends with its own status (0), the instance with it" test "$status" = 0
check_output "its ranks ran" "hello from rank 1 of 2" cat "$T_DIR/out"
check_output "the shell said it went on without the library's finalize" \
    "PMIx_server_finalize did not return within 5 s: the shell goes on without it" cat "$T_DIR/out"
check "all within 30 s ($took s), the 5 s bound among them" test "$took" -lt 30
