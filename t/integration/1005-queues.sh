#!/bin/bash
# Named queues ([queues.NAME]): each its own nodes by property, a default,
# limits refused at submit with the limit named, disable (no submissions,
# with the reason) and stop (jobs stay pending, with the reason), a full
# queue not blocking another, and {queue} in banyan jobs.
. "$(dirname "$0")/lib.sh"

for r in 0 1 2 3; do lstopo-no-graphics -i "pack:1 core:2 pu:1" --of xml "$T_DIR/rank$r.xml" 2>/dev/null; done
banyan keygen "$T_DIR/cert" >/dev/null
cat >"$T_DIR/q.toml" <<TOML
[bootstrap]
size = 4
port = $(free_port)
bind = "tcp://127.0.%r.1:%p"
connect = "tcp://127.0.%r.1:%p"
curve_cert = "$T_DIR/cert"
[tbon]
fanout = 2
[resource]
hwloc_xml = "$T_DIR/rank%r.xml"
properties = { batch = "0-1", debug = "2-3" }
[queues.batch]
requires = "batch"
default = true
max-nodes = 2
[queues.debug]
requires = "debug"
max-duration = "10m"
max-active-per-user = 2
policy = "fcfs"
TOML
for r in 0 1 2 3; do start_broker "$T_DIR/q.toml" "$r"; done
BANYAN_URI=$(uri_of 0)
export BANYAN_URI
CLEANUP+=("banyan shutdown")
wait_for "4 brokers up" 20 all_up 4
wait_for "the instance runs" 20 banyan ready

ranks_of_run() { "$@" sh -c 'echo "${BANYAN_URI##*/rank-}"' | sed 's,/.*,,' | sort -un | paste -sd, -; }
state_of() { banyan jobs -a -n 100 --no-header -o '{id} {st} {queue} {info}' | grep "^ *$1 "; }
export -f state_of

check_output "queue list: batch is the default, with its limits and nodes" \
    "^batch +\* +- +2 +- +en/start +batch$" banyan queue list
check_output "queue list: debug" "^debug +10m00s +- +2 +en/start +debug$" banyan queue list
check_output "without --queue: the default queue's nodes" "^0,1$" ranks_of_run banyan run -N2 -n2
check_output "--queue debug: its nodes" "^2,3$" ranks_of_run banyan run -N2 -n2 --queue=debug
one=$(banyan submit -q debug true)
banyan job wait "$one" >/dev/null
check_output "banyan jobs shows the queue" "^ *$one +CD +debug" state_of "$one"

# Limits, refused at submit, the limit named.
check_fails "max-nodes" "queue 'batch': 3 nodes is over its max-nodes of 2" banyan submit -N3 -n3 true
check_fails "max-duration" "queue 'debug': a time limit of 1h00m is over its max-duration of 10m00s" \
    banyan submit -q debug -t 1h true
check_fails "an unknown queue" "unknown queue 'gpu' \(queues: batch, debug\)" banyan submit -q gpu true
jobs_before=$(banyan jobs -a --no-header | wc -l)
check_fails "a job its queue's nodes can never hold is refused at submit, in one line" \
    "^banyan submit: unsatisfiable: the 2 nodes that satisfy '.*debug.*' can never hold this request$" \
    banyan submit -q debug -N3 -n3 true
check_output "and no job was made" "^$jobs_before$" sh -c "banyan jobs -a --no-header | wc -l"
a=$(banyan submit -q debug sleep 300)
b=$(banyan submit -q debug sleep 300)
check_fails "max-active-per-user" "queue 'debug': uid [0-9]+ has 2 active jobs there, its max-active-per-user" \
    banyan submit -q debug true
banyan cancel "$a" "$b"
wait_for "the sleepers end" 20 sh -c "banyan jobs -a -o '{id} {st}' | grep -q '$b  *CA'"
# R's window is the time limit: the queue's 600 s.
nolimit=$(banyan submit -q debug true)
banyan job wait "$nolimit" >/dev/null
check_output "a job with no time limit in debug gets its max-duration" "^600$" \
    sh -c "banyan job info $nolimit | python3 -c 'import json,sys; R=json.load(sys.stdin)[\"R\"][\"execution\"]; print(round(R[\"expiration\"] - R[\"starttime\"]))'"

# A full queue does not block the other: batch is busy, debug runs.
f1=$(banyan submit -N2 -n4 sleep 300)
wait_for "batch is full" 10 sh -c "banyan jobs -o '{id} {st}' | grep -q '$f1  *R'"
waiting=$(banyan submit -N1 -n1 true)
wait_for "a batch job waits" 10 bash -c "state_of $waiting | grep -q ' S batch'"
check_output "debug still runs jobs" "^2$|^3$" ranks_of_run banyan run -n1 -q debug

# Stop: jobs stay pending, with the reason; start: they run.
check "stop debug" banyan queue stop debug --reason "firmware update"
held=$(banyan submit -q debug true)
wait_for "a debug job stays pending, saying why" 10 \
    bash -c "state_of $held | grep -q 'S debug .*queue debug is stopped: firmware update'"
check_output "queue status says so" "^debug: enabled, stopped: firmware update; 1 pending, 0 running$" \
    banyan queue status debug
check "start debug" banyan queue start debug
check "the held job runs" timeout 20 banyan job wait "$held"

# Disable: submissions refused with the reason; queued jobs stay.
check "disable batch" banyan queue disable batch --reason "draining for maintenance"
check_fails "a disabled queue refuses, with the reason" "queue 'batch' is disabled: draining for maintenance" \
    banyan submit true
check_output "the waiting batch job is still there" "S batch" state_of "$waiting"
check "enable batch" banyan queue enable batch
check "cancel the sleeper" banyan cancel "$f1"
check "the waiting job runs once batch has room" timeout 20 banyan job wait "$waiting"

# banyan job update: a pending job (held, so it stays so) changes queue,
# checked as at submit and by the scheduler.
held=$(banyan submit --urgency=0 -q batch -t 1h true)
check_fails "update: over the new queue's max-duration, refused naming it" \
    "^banyan job update: queue 'debug': a time limit of 1h00m is over its max-duration of 10m00s$" \
    banyan job update "$held" queue=debug
check "update: with a time limit under it, it moves" banyan job update "$held" queue=debug time-limit=5m
check_output "... {queue} says so" "^ *$held S debug " state_of "$held"
pinned=$(banyan submit --urgency=0 --requires=batch true)
check_fails "update: a queue whose nodes can never hold it is refused" "^banyan job update: unsatisfiable: " \
    banyan job update "$pinned" queue=debug
check_output "... and it stays where it was" "^ *$pinned S batch " state_of "$pinned"
check_output "... nothing stored for the refusals" "^1 0$" sh -c "echo \$(banyan job eventlog $held | grep -c ' update ') \$(banyan job eventlog $pinned | grep -c ' update ')"
check "cancel them" banyan cancel "$held" "$pinned"

# Stopped and disabled states, with their reasons, survive a crash of
# rank 0 (kill -9) and a clean restart of the instance; so does a drain.
check "stop debug" banyan queue stop debug --reason "rack 2 power"
check "disable batch" banyan queue disable batch --reason "quota review"
check "drain rank 3" banyan resource drain 3 fan failure
kill -9 "$(broker_pid "$T_DIR" 0)"
start_broker "$T_DIR/q.toml" 0
wait_for "rank 0 runs again" 30 banyan ready
check_output "after a crash of rank 0, debug is still stopped" \
    "^debug: enabled, stopped: rack 2 power; 0 pending, 0 running$" banyan queue status debug
check_fails "... and batch still refuses, with its reason" "queue 'batch' is disabled: quota review" banyan submit true
check_output "... and rank 3 is still drained, with its reason" "drained +1 +3 .*fan failure \(" banyan resource status
check "shut down" banyan shutdown
no_brokers_left "every broker exited" "$T_DIR"
for r in 0 1 2 3; do start_broker "$T_DIR/q.toml" "$r"; done
wait_for "the instance runs again" 30 banyan ready
check_output "after a clean restart too" "^batch: disabled: quota review, started; 0 pending, 0 running$" \
    banyan queue status batch
check_output "... debug is stopped" "stopped: rack 2 power" banyan queue status debug
check_output "... rank 3 is drained" "drained +1 +3 .*fan failure \(" banyan resource status
check "undrain rank 3" banyan resource undrain 3
# The stored state of a queue taken out of the config is ignored, with a
# warning, while it is out (banyan-queue(1)), and holds once it is back.
check "shut down" banyan shutdown
no_brokers_left "every broker exited" "$T_DIR"
sed '/^\[queues.batch\]$/,/^max-nodes = 2$/d' "$T_DIR/q.toml" >"$T_DIR/q-nobatch.toml"
for r in 0 1 2 3; do start_broker "$T_DIR/q-nobatch.toml" "$r"; done
wait_for "the instance runs without queue batch" 30 banyan ready
check_output "batch's stored state is ignored, with a warning" \
    "queue batch was disabled but is not configured now; ignored" cat "$T_DIR/rank-0.log"
check_fails "... batch is unknown meanwhile" "unknown queue 'batch'" banyan queue status batch
check "shut down" banyan shutdown
no_brokers_left "every broker exited" "$T_DIR"
for r in 0 1 2 3; do start_broker "$T_DIR/q.toml" "$r"; done
wait_for "the instance runs with batch again" 30 banyan ready
check_output "back in the config, batch is disabled again" "^batch: disabled: quota review" banyan queue status batch
rank0=$(broker_pid "$T_DIR" 0)
check_output "rank 0 holds queues.db open" "queues\.db" ls -l "/proc/$rank0/fd"
open_without_cloexec "$rank0" >"$T_DIR/fds.out"
check "every descriptor of rank 0, queues.db's among them, is close-on-exec" test ! -s "$T_DIR/fds.out"
check "start debug" banyan queue start debug
check "enable batch" banyan queue enable batch
check_output "list: both back" "^2$" sh -c "banyan queue list | grep -c en/start"

# Bad input: one line each.
check_fails "queue stop of an unknown queue" "unknown queue 'nope'" banyan queue stop nope
check_fails "queue status of an unknown queue" "unknown queue 'nope'" banyan queue status nope
check "shut down" banyan shutdown
CLEANUP=()

# Bad config: one line naming the key, no instance.
bad() { printf '[bootstrap]\nsize = 1\n%s\n' "$1" >"$T_DIR/bad.toml"; timeout 20 banyan start --config "$T_DIR/bad.toml" -- true; }
export -f bad
check_fails "a limit of the wrong type" "queues.q.max-nodes: expected an integer" bad '[queues.q]
max-nodes = "two"'
check_fails "an unknown key" "queues.q.maxnodes: unknown key" bad '[queues.q]
maxnodes = 2'
check_fails "a bad requires" "queues.q.requires: .*a '\(' is not closed" bad '[queues.q]
requires = "(gpu"'
check_fails "an unknown policy" "queues.q.policy: unknown queue policy 'lifo'" bad '[queues.q]
policy = "lifo"'
check_fails "two defaults" "queues.r.default: queue 'q' is the default already" bad '[queues.q]
default = true
[queues.r]
default = true'
