#!/bin/bash
# The shell's PMI-1 (simple PMI) server, spoken by hand by t/mpi/pmi-wire:
# every command and the key exchange across 4 brokers through the fence,
# then each way a client can break the protocol: one clear exception, the
# job failed, never a hang. And -o pmi choosing the servers.
. "$(dirname "$0")/lib.sh"

MPI_DIR=${BANYAN_MPI_DIR:-}
if [ -z "$MPI_DIR" ] || [ ! -x "$MPI_DIR/pmi-wire" ]; then
    echo "the PMI test programs are not built (BANYAN_MPI_DIR)"
    exit 1
fi
export MPI_DIR

cat >"$T_DIR/pmi.sh" <<'SCRIPT'
set -u
wire="$MPI_DIR/pmi-wire"
check_output "8 tasks on 4 brokers: every rank reads every rank's key after the barrier" \
    '^8$' sh -c "banyan run -N4 -n8 $wire exchange | grep -c '8 of 8 keys, mapping (vector,(0,4,2))'"
check_output "... values keep their spaces and '=' signs; universe and size are the job's" \
    'rank 0 of 8 \(universe 8\)' banyan run -N4 -n8 "$wire" exchange
# A fence whose first rank is not above the others' (rank 0 drained: the
# job on ranks 1-3, and rank 2 is not below rank 1): its result reaches
# each rank by exec.fence-data, multicast from rank 1 to the rank below it
# and, through its parent, to rank 2 (shell.md §4.1).
banyan resource drain 0 for a fence led by rank 1 >/dev/null
id=$(banyan submit -N3 -n3 "$wire" exchange)
check_output "a fence led by rank 1 reaches the rank below it and, through rank 0, rank 2" '^3$' \
    sh -c "timeout 60 banyan job attach $id | grep -c '3 of 3 keys'"
check_output "... the job ran on ranks 1-3" '^"1-3"$' sh -c "banyan job info $id | jq '.R.execution.R_lite[].rank'"
banyan resource undrain 0 >/dev/null
check_output "uneven tasks per node: the process mapping has one block per run" \
    'mapping \(vector,\(0,1,2\),\(1,1,1\)\)' sh -c "banyan run -N2 -n3 $wire exchange | head -1"
check_output "a get before any put answers rc=-1, key not found (the client decides)" \
    'get before put: cmd=get_result rc=-1 msg=key_nobody-put-this_not_found' \
    banyan run -N2 -n2 "$wire" get-before-put
start=$SECONDS
check_fails "a malformed command fails the job, naming the task and the line" \
    "pmi: task [01]: PMI-1: malformed command 'this is not a command'" banyan run -N2 -n2 "$wire" malformed
check_fails "an unknown command fails the job, naming it" \
    "pmi: task [01]: PMI-1: unknown command 'frobnicate'" banyan run -N2 -n2 "$wire" unknown
check_fails "a task that leaves without the barrier fails the job; the others do not hang" \
    'pmi: task 1: PMI-1: it exited after init, without finalize, before barrier 1' \
    banyan run -N4 -n4 "$wire" skip-barrier
check_fails "an abort with a message of several words, the task gone at once: an abort exception with it" \
    'abort: task 0 called MPI_Abort \(status 9\): out of memory on this node' banyan run -N2 -n2 "$wire" abort
check_fails "more fence data than one message carries (4 nodes x 8 MB): the job fails, saying so" \
    'fence \(PMIx or PMI-1\): the job.s fence data is over 12 MiB in all' banyan run -N4 -n4 "$wire" bigput
check "... all five at once, not after the exit timeout ($((SECONDS - start)) s)" test $((SECONDS - start)) -lt 20
check_output "... and the job failed" '^F$' sh -c "banyan jobs -a --no-header -n1 -o '{st}'"
check_output "-o pmi=pmix: no PMI_FD, PMIx's variables still set" '^none [1-9]' \
    banyan run -o pmi=pmix sh -c 'echo ${PMI_FD:-none} $(env | grep -c ^PMIX_)'
check_output "-o pmi=simple: PMI_FD and no PMIx" '^3 0$' \
    banyan run -o pmi=simple sh -c 'echo ${PMI_FD:-none} $(env | grep -c ^PMIX_)'
check_output "-o pmi=off: neither" '^none 0$' banyan run -o pmi=off sh -c 'echo ${PMI_FD:-none} $(env | grep -c ^PMIX_)'
check_output "default: both" '^3 [1-9]' banyan run sh -c 'echo ${PMI_FD:-none} $(env | grep -c ^PMIX_)'
check_output "a submitter's own PMI_ variables do not reach the tasks" '^0 2 1 2$' \
    sh -c "env PMI_RANK=5 PMI_SIZE=9 banyan run -N2 -n2 sh -c 'echo \$PMI_RANK \$PMI_SIZE' | sort | tr '\n' ' ' | sed 's/ $//'"
n=$(banyan jobs -a --no-header | wc -l)
check_fails "an unknown -o pmi value: one line naming it" \
    "^banyan run: -o pmi=pmi3: unknown PMI 'pmi3' \(expected pmix, simple, both as pmix,simple, or off\)$" \
    banyan run -o pmi=pmi3 true
check "... and nothing submitted" test "$(banyan jobs -a --no-header | wc -l)" = "$n"
SCRIPT
HWLOC_SYNTHETIC="core:4 pu:1" banyan start --test-size=4 bash "$T_DIR/pmi.sh"
