#!/bin/bash
# MPI programs started by `banyan run` with no mpirun or mpiexec: Open MPI
# through the shells' PMIx servers, MPICH through their PMI-1 servers; both
# exchange fence data through the brokers. hello, ring, allreduce and
# MPI_Abort at 1, 2 and 4 brokers, 1 to 16 ranks, with each MPI.
. "$(dirname "$0")/lib.sh"
need_cores 2 "MPI programs run two ranks on a node"

MPI_DIR=${BANYAN_MPI_DIR:-}
if [ -z "$MPI_DIR" ] || [ ! -x "$MPI_DIR/mpi-hello" ]; then
    echo "the MPI test programs are not built (BANYAN_MPI_DIR)"
    exit 1
fi
export MPI_DIR
# 16 ranks share this machine's cores: let idle ranks yield.
export OMPI_MCA_mpi_yield_when_idle=1
# Every broker is on this host: ranks talk over loopback. A bridge that a
# container test adds or removes meanwhile must not be Open MPI's choice
# (an allreduce failed once binding to a podman bridge being torn down).
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
# MPICH's UCX likewise (its init_worker found "No such device" once while
# a container test changed the interfaces).
export UCX_NET_DEVICES=lo

cat >"$T_DIR/mpi.sh" <<'SCRIPT'
set -u
nbrokers=$1
mpi=$2  # mpi (Open MPI) or mpich: the programs' prefix
hello() {  # N n: every rank says hello, with the right size
    out=$(banyan run -N"$1" -n"$2" "$MPI_DIR/$mpi-hello") || return 1
    [ "$(echo "$out" | grep -c "of $2 on")" = "$2" ] &&
        [ "$(echo "$out" | sed 's/hello from rank \([0-9]*\) .*/\1/' | sort -n | tr '\n' ' ')" = "$(seq 0 $(($2 - 1)) | tr '\n' ' ')" ]
}
export -f hello
export mpi
for n in $(echo 1 $nbrokers $((nbrokers * 4)) | tr ' ' '\n' | sort -un); do
    nodes=$((n < nbrokers ? n : nbrokers))
    check "$mpi, $nodes of $nbrokers broker(s): hello, $n ranks, each rank once with size $n" hello "$nodes" "$n"
done
n=$((nbrokers * 4))
check_output "$mpi, $nbrokers broker(s): ring of $n ranks" "ring: size $n token $((n * (n - 1))) expected $((n * (n - 1)))" \
    banyan run -N"$nbrokers" -n"$n" "$MPI_DIR/$mpi-ring"
check_output "$mpi, $nbrokers broker(s): allreduce of $n ranks, no errors" "allreduce: size $n checksum [0-9]+ errors 0" \
    banyan run -N"$nbrokers" -n"$n" "$MPI_DIR/$mpi-allreduce"
start=$SECONDS
check_fails "$mpi, $nbrokers broker(s): MPI_Abort ends the job with an abort exception" \
    'abort: task [0-9]+ called MPI_Abort \(status 7\)' banyan run -N"$nbrokers" -n"$n" "$MPI_DIR/$mpi-abort"
check "... at once, not after the exit timeout ($((SECONDS - start)) s)" test $((SECONDS - start)) -lt 20
check_output "... and the job failed" '^F$' sh -c "banyan jobs -a --no-header -n1 -o '{st}'"
SCRIPT
# Four cores per broker, whatever this machine has (tasks run unbound).
# HWLOC_COMPONENTS (set by sanitizer runs) would make hwloc ignore
# HWLOC_SYNTHETIC; a synthetic topology loads no PCI plugin anyway.
sanitizer_components=${HWLOC_COMPONENTS-}
unset HWLOC_COMPONENTS
for mpi in mpi mpich; do
    for nbrokers in 1 2 4; do
        HWLOC_SYNTHETIC="core:4 pu:1" banyan start --test-size=$nbrokers bash "$T_DIR/mpi.sh" $nbrokers $mpi
    done
done

# On this machine's own topology (no synthetic one): the ranks load the
# topology the shell hands them through PMIx instead of discovering it
# again, each of them (~25 ms per rank here).
cat >"$T_DIR/topology.sh" <<'SCRIPT'
set -u
check_output "ranks load the shell's topology, not their own discovery" '^2 0$' \
    sh -c "OMPI_MCA_hwloc_base_verbose=1 banyan run -n2 $MPI_DIR/mpi-hello 2>&1 |
           awk '/loading topology from XML/ {x++} /discovering topology/ {d++} END {print x+0, d+0}'"
# PMIx starts on first use (doc/spec/shell.md §4.3): the library's
# progress thread is the shell's only other thread.
check_output "a job that never calls PMIx: its shell never starts the PMIx library (one thread)" '^1$' \
    banyan run sh -c 'ls /proc/$PPID/task | wc -l'
# A job that never used PMI leaves nothing behind that the next one needs:
# MPI right after a burst of jobs that did not call it.
banyan submit --cc=1-100 true >/dev/null
banyan job wait --all
check_output "no job of a burst of 100 non-MPI jobs failed" '^0$' \
    sh -c "banyan jobs -a --no-header -f failed,canceled,timeout | wc -l"
check_output "Open MPI (PMIx) hello right after the burst" '^2$' \
    sh -c "banyan run -n2 $MPI_DIR/mpi-hello | grep -c 'of 2 on'"
check_output "MPICH (PMI-1) hello right after the burst" '^2$' \
    sh -c "banyan run -n2 $MPI_DIR/mpich-hello | grep -c 'of 2 on'"
check_output "one rank on its own cores: Open MPI is not told to yield" '^yield=$' \
    env -u OMPI_MCA_mpi_yield_when_idle banyan run -n1 sh -c 'echo yield=$OMPI_MCA_mpi_yield_when_idle'
SCRIPT
# (Sanitizer runs keep hwloc's PCI plugin off: it leaks 1 KB per load.)
env ${sanitizer_components:+HWLOC_COMPONENTS=$sanitizer_components} banyan start --test-size=1 bash "$T_DIR/topology.sh" \
    2>"$T_DIR/topology.err"
cat "$T_DIR/topology.err" >&2
check "the tasks' PMIx environment is the library's own: the shells logged no variable that differs" \
    sh -c "! grep 'which the tasks were not given' '$T_DIR/topology.err'"

# A PMIx library that cannot start (here: told to use a component it does
# not have) fails the MPI job that needs it, saying why, once.
cat >"$T_DIR/pmix-fails.sh" <<'SCRIPT'
set -u
check_fails "the PMIx library cannot start: the job fails and its stderr says why" '^banyan-shell: PMIx server init: ' \
    env -u PMIX_MCA_bfrops banyan run -n2 "$MPI_DIR/mpi-hello"
last_out; cp "$LAST_OUT" "$T_DIR/pmix-fails.out"
check_output "... once" '^1$' grep -c '^banyan-shell: PMIx' "$T_DIR/pmix-fails.out"
check_output "a job that does not call PMIx runs as before" '^ok$' env -u PMIX_MCA_bfrops banyan run echo ok
SCRIPT
PMIX_MCA_bfrops=nonesuch banyan start --test-size=1 bash "$T_DIR/pmix-fails.sh"

# Brokers sharing a host each claim all its cores (doc/spec/shell.md §5):
# their shells do not bind, and MPI ranks yield when idle, unless the job
# asks otherwise.
cat >"$T_DIR/shared-host.sh" <<'SCRIPT'
set -u
all=$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)
check_output "brokers sharing a host: tasks unbound (every CPU: $all)" "^$all $all\$" \
    sh -c "banyan run -N2 -n2 awk '/^Cpus_allowed_list/ {print \$2}' /proc/self/status | sort | tr '\n' ' ' | sed 's/ \$//'"
check_output "... and told to yield when idle" '^1 1$' \
    sh -c "env -u OMPI_MCA_mpi_yield_when_idle banyan run -N2 -n2 sh -c 'echo \$OMPI_MCA_mpi_yield_when_idle' | tr '\n' ' ' | sed 's/ \$//'"
check_output "... a value the job sets wins" '^0$' \
    banyan run -N2 -n2 --env OMPI_MCA_mpi_yield_when_idle=0 sh -c 'test $BANYAN_TASK_RANK = 0 && echo $OMPI_MCA_mpi_yield_when_idle; true'
check_output "Open MPI hello over two brokers of one host" '^2$' \
    sh -c "banyan run -N2 -n2 $MPI_DIR/mpi-hello | grep -c 'of 2 on'"
check_output "the instance's log says the cores overlap" 'share host .* each claims all its cores' \
    banyan dmesg
SCRIPT
env ${sanitizer_components:+HWLOC_COMPONENTS=$sanitizer_components} banyan start --test-size=2 bash "$T_DIR/shared-host.sh"
