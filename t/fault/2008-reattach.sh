#!/bin/bash
# No running job is killed by a crash of rank 0. Three configured brokers;
# job B on
# rank 0 exits 7 while rank 0 is away, job A runs on ranks 1-2 and writes
# a line every 0.3 s per task. Rank 0 is killed with SIGKILL and
# started again on the same state and run directories: A goes on (a
# `reattach` event, its output whole and in order, attach works), B has
# its real status and end time, and a job that needs every core waits for
# A (the scheduler got A's resources back before its first pass). A clean
# shutdown, by contrast, ends the tasks of the jobs still running.
. "$(dirname "$0")/../integration/lib.sh"
need_cores 2 "job A runs 4 tasks over ranks 1-2, two per node"

start_cluster 3
nap=3.$((RANDOM % 9000 + 1000))  # (a name no other test's process has)
b=$(banyan submit -n2 sh -c "sleep $nap; exit 7")
wait_for "B runs" 20 sh -c "banyan jobs --no-header -o '{id} {st}' | grep -q '^$b R'"
a=$(banyan submit -N2 -n4 sh -c 'for i in $(seq 1 30); do echo "$BANYAN_TASK_RANK $i"; sleep 0.3; done')
wait_for "A runs on ranks 1-2" 20 sh -c "banyan jobs --no-header -o '{id} {st}' | grep -q '^$a R'"
rank0=$(broker_pid "$T_DIR" 0)
server=$(pgrep -P "$rank0" -f -- '--fork-server')
kill -9 "$rank0"
crashed=$(date +%s.%N)
if ! sanitized; then  # (sanitizer builds have no fork server)
    check "rank 0 had a shell fork server" [ -n "$server" ]
    wait_for "which ends with its broker (B's shell, forked by it, goes on)" 10 sh -c "! kill -0 $server 2>/dev/null"
fi
wait_for "B ends meanwhile" 10 sh -c "! pgrep -f '^sleep $nap\$'"
# Its task (the sh around the sleep) reaped by its shell, which dates the
# finish then: a busy machine can run that after the sleep is gone.
wait_for "B's task is reaped" 10 sh -c "! pgrep -f 'sleep $nap; exit 7\$'"
restarted=$(date +%s.%N)
start_broker "$T_DIR/c.toml" 0
wait_for "rank 0 is back, its followers with it" 30 all_up 3
d=$(banyan submit -N3 -n6 true)
check "A completes" banyan job wait "$a"
check_output "A was re-attached, not ended by the restart" "reattach ranks=1-2" banyan job eventlog "$a"
check "with no exception" lacks exception banyan job eventlog "$a"
banyan job attach "$a" >"$T_DIR/a.out" 2>&1
check_output "every line of A's 4 tasks is there once (120)" "^120$" sh -c "sort -u $T_DIR/a.out | wc -l"
check_output "no line twice" "^120$" sh -c "wc -l <$T_DIR/a.out"
for t in 0 1 2 3; do
    check "task $t's lines in order" sh -c "[ \"\$(grep '^$t ' $T_DIR/a.out | cut -d' ' -f2 | tr '\n' ' ')\" = \"$(seq -s' ' 1 30) \" ]"
done
check "B ended with its own status, 7" sh -c "banyan job wait $b; [ \$? -eq 7 ]"
check_output "B's finish is dated when its tasks ended, while rank 0 was away" "^yes " \
    sh -c "banyan job eventlog --json $b | python3 -c '
import json, sys
ev = [json.loads(l) for l in sys.stdin]
fin = [e[\"timestamp\"] for e in ev if e[\"name\"] == \"finish\"][0]
print(\"yes\" if $crashed < fin < $restarted else \"no\", $crashed, fin, $restarted)'"
check "B has no exception either" lacks exception banyan job eventlog "$b"
check "D, needing every core, ran" banyan job wait "$d"
check_output "D started only after A ended" "^yes$" sh -c "
    a_end=\$(banyan job eventlog --json $a | python3 -c 'import json,sys; print([json.loads(l)[\"timestamp\"] for l in sys.stdin if json.loads(l)[\"name\"] == \"finish\"][0])')
    d_alloc=\$(banyan job eventlog --json $d | python3 -c 'import json,sys; print([json.loads(l)[\"timestamp\"] for l in sys.stdin if json.loads(l)[\"name\"] == \"alloc\"][0])')
    python3 -c \"print('yes' if \$d_alloc >= \$a_end else 'no')\""
# Output is stored once (shell.md §8): a chunk sent again under its name
# [rank, incarnation, n] — what an exec service does with a request that a
# rank 0 which died may have stored before it could answer — is answered
# and dropped, before and after a restart of rank 0; a new n is stored.
decimal() { python3 -c 'import sys; a="123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"; n=0
for c in sys.argv[1].lstrip("fƒ"): n = n * 58 + a.index(c)
print(n)' "$1"; }
e=$(banyan submit sleep 600)
wait_for "E runs" 20 sh -c "banyan jobs --no-header -o '{id} {st}' | grep -q '^$e R'"
chunk() {  # chunk N TEXT: job-manager.output of E, named [2, 77, N]
    banyan-test-client rpc job-manager.output \
        "{\"id\": $(decimal "$e"), \"task\": 0, \"stream\": \"stdout\", \"data\": \"$2\\n\", \"chunk\": [2, 77, $1]}"
}
check "a chunk is stored" chunk 1 first
check "the same chunk again is answered" chunk 1 first
check "a later one is stored" chunk 2 second
kill -9 "$(broker_pid "$T_DIR" 0)"
start_broker "$T_DIR/c.toml" 0
wait_for "rank 0 is back again" 30 all_up 3
check "after the restart, chunk 2 again is answered" chunk 2 second
check "... and chunk 3 stored" chunk 3 third
check_fails "a malformed chunk is refused in one line" "^error [0-9]+: output.chunk: expected \[rank, incarnation, n\]" \
    banyan-test-client rpc job-manager.output "{\"id\": $(decimal "$e"), \"data\": \"x\", \"chunk\": [2, -1, 1]}"
check_output "E's output has each chunk once, in order" "^first second third $" \
    sh -c "timeout 5 banyan job attach $e 2>/dev/null | head -3 | tr '\n' ' '"
check "cancel E" banyan cancel "$e"

marker=$((RANDOM + 1000))
banyan submit -N3 -n3 sleep "$marker" >/dev/null
wait_for "a last job runs on all three" 20 sh -c "[ \$(pgrep -fc '^sleep $marker\$') -eq 3 ]"
check "shutdown" banyan shutdown
no_brokers_left "every broker exited" "$T_DIR"
check "a clean stop ends its tasks, not leaves them to wait" sh -c "! pgrep -f '^sleep $marker\$'"
check "no shell waits to be re-attached" sh -c "! ls $T_DIR/rank-*/jobs/*/reattach.sock"
check "no job's run directory is left, re-attached ones included" \
    sh -c "! ls -d $T_DIR/rank-*/jobs/*/ 2>/dev/null | grep ."
