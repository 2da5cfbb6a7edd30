#!/bin/bash
# Advance reservations (doc/spec/reservations.md): bad requests refused in
# one line with nothing kept; a reservation's node takes only jobs that end
# before its start, and says why the others wait; a job that names it runs
# there once it begins; a maintenance reservation drains its node with the
# reason at its start and undrains it at its end; reservations, and the
# node a reservation holds, come back after rank 0 is killed and started
# again, and the maintenance window still ends on time.
. "$(dirname "$0")/lib.sh"

start_cluster 3 $'[resource]\nsynthetic = "node[0-2]: core:2"'
CLEANUP+=("banyan shutdown")
wait_for "the instance runs" 20 banyan ready
sim() { echo "-S exec.test.run_duration=$1"; }
info_of() { banyan jobs -a --no-header -o '{id} {st} {info}' | grep "^ *$1 "; }
export -f info_of
ranks_of() { banyan job info "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["R"]["execution"]["R_lite"][0]["rank"])'; }

# Bad requests: one line each, nothing kept.
check_fails "a reservation in the past is refused" "would end in the past" \
    banyan reservation create old --start -2h --duration 1h --nodes 1
check_fails "... as is one that starts in the past" "would start in the past .*give the start as now" \
    banyan reservation create late --start -10m --duration 1h --nodes 1
check_fails "an unknown node is named" "unknown node 'nosuch'" \
    banyan reservation create r1 --duration 1h --hostlist nosuch
check_fails "more nodes than there are free" "only 3 of the 4 nodes asked for are free for the whole window" \
    banyan reservation create r2 --duration 1h --nodes 4
check_fails "no nodes given" "give its nodes by count" banyan reservation create r3 --duration 1h
check_fails "a bad name" "reservation name 'a b'" banyan reservation create 'a b' --duration 1h --nodes 1
check_fails "no duration" "--duration or --end" banyan reservation create r4 --nodes 1
check_fails "a constraint no node meets" "no node satisfies 'gpu'" \
    banyan reservation create r5 --duration 1h --requires gpu
check_output "none of them was kept" "^NAME +START" banyan reservation list
check "... the list has only its header" sh -c '[ "$(banyan reservation list | wc -l)" -eq 1 ]'

# A reservation of node2 from 6 s from now, for an hour.
check_output "a reservation of node2 is made" "^course: node2 from " \
    banyan reservation create course --start +6s --duration 1h --hostlist node2 --users "$(id -un)"
check_fails "a second one overlapping it on node2 is refused, naming it" "node node2 is in reservation course" \
    banyan reservation create other --start +1h --duration 1h --hostlist 'node[1-2]'
check_output "it is listed, waiting, for its user" "^course +[-0-9T:]+ +[-0-9T:]+ +waiting +node2 +users $(id -un)" \
    banyan reservation list
inside=$(banyan submit --reservation course -N1 $(sim 3600) true)
wait_for "a job in it waits for its start, and says so" 10 \
    bash -c "info_of $inside | grep -Eq ' S waiting for reservation course \(starts [0-9]{2}:[0-9]{2}\)'"
check_fails "a job may not name a reservation that does not exist" "no reservation named 'nosuch'" \
    banyan submit --reservation nosuch true
# Before the window, node2 takes a job that ends before it, and no other.
short=$(banyan submit -N3 -t 2s $(sim 1) true)
check "a three-node job that ends before the reservation runs at once" timeout 20 banyan job wait "$short"
long=$(banyan submit -N3 -t 1h $(sim 3600) true)
wait_for "one that would run into it waits, and says for what" 10 \
    bash -c "info_of $long | grep -Eq ' S waiting for reservation course \(starts [0-9]{2}:[0-9]{2}\)'"
free=$(banyan submit -N2 $(sim 3600) true)
check "a two-node job without a limit starts, on the other nodes" banyan job wait-event -t 20s "$free" start
check_output "... ranks 0 and 1" "^0-1$" ranks_of "$free"
check "once the reservation begins, the job in it starts" banyan job wait-event -t 20s "$inside" start
check_output "... on node2 (rank 2)" "^2$" ranks_of "$inside"
check_output "the reservation is active" "^course +[-0-9T:]+ +[-0-9T:]+ +active" banyan reservation list
banyan cancel "$long"
# Who may run in one: its users, its banks' jobs, the owner (the job
# manager asks at submit as here).
check_fails "another user, not named, may not" "reservation course: uid 4242 may not use it" \
    banyan-test-client rpc reservation.check '{"name": "course", "userid": 4242}'
check "a user it names may" banyan-test-client rpc reservation.check "{\"name\": \"course\", \"userid\": $(id -u)}"
check "the owner may" banyan-test-client rpc reservation.check '{"name": "course", "userid": 4242, "owner": true}'

on1=$(banyan submit -N1 --requires host:node1 $(sim 3600) true)
check "a job on node1 alone runs" banyan job wait-event -t 20s "$on1" start
# Maintenance of node1 from 4 s from now, for 8 s.
check_output "a maintenance reservation is made" "^maint: node1 " \
    banyan reservation create maint --start +4s --duration 8s --hostlist node1 --maintenance
check_fails "no job runs in a maintenance reservation" "reservation maint is for maintenance" \
    banyan submit --reservation maint true
wait_for "at its start node1 is drained, with the reason" 15 \
    sh -c "banyan resource status | grep -Eq 'draining +1 +1 .*maintenance reservation maint'"
check_output "a job that ran on node1 before it runs on" "^$free R" banyan jobs --no-header -o '{id} {st}'
banyan cancel "$free"  # (its part on rank 0 would end with rank 0)

# Rank 0 killed and started again while both are in force.
kill -9 "$(broker_pid "$T_DIR" 0)"
wait_for "rank 0 is gone" 10 sh -c "! banyan ping -c1 broker >/dev/null 2>&1"
start_broker "$T_DIR/c.toml" 0
wait_for "rank 0 is back, with its followers" 30 all_up 3
check "the scheduler took back every running job, those on reserved nodes too" \
    lacks "refused a running job" cat "$T_DIR/rank-0.log"
check_output "the job on node1 runs on" "^$on1 R" banyan jobs --no-header -o '{id} {st}'
banyan cancel "$on1"
one=$(banyan submit -N1 -x $(sim 1) true)
check "a one-node job runs on node0, the one node neither reserved nor drained" timeout 20 banyan job wait "$one"
check_output "... rank 0" "^0$" ranks_of "$one"
check "both reservations are still there: course" sh -c "banyan reservation list | grep -q '^course '"
check "... maint" sh -c "banyan reservation list | grep -q '^maint '"
held=$(banyan submit -N3 $(sim 1) true)
wait_for "at its end node1 is undrained" 20 sh -c "! banyan resource status | grep -q 'maintenance reservation maint'"
wait_for "node2 is still held: a three-node job without a limit waits for the reservation" 10 \
    bash -c "info_of $held | grep -Eq ' S waiting for reservation course'"
wait_for "... and the maintenance reservation is gone" 5 sh -c "! banyan reservation list | grep -q '^maint '"

# Deleted, the reservation's node is free again; a job waiting in it ends.
waiting=$(banyan submit --reservation course -N1 $(sim 3600) true)
wait_for "a second job in course waits for room in it" 10 \
    bash -c "info_of $waiting | grep -q ' S insufficient resources in reservation course'"
check "the reservation is deleted" banyan reservation delete course
check_output "the job running in it runs on" "^$inside R" banyan jobs --no-header -o '{id} {st}'
check_fails "a second delete: no such reservation" "no reservation named 'course'" banyan reservation delete course
check_fails "the job waiting in it ends, saying why" "reservation course was deleted" banyan job wait "$waiting"
banyan cancel "$inside"
check "the job that waited for node2 runs" timeout 20 banyan job wait "$held"
# A job in a reservation may run past its end.
check_output "a three-second reservation of node0" "^brief: node0 " \
    banyan reservation create brief --duration 3s --hostlist node0
past=$(banyan submit --reservation brief -N1 -x $(sim 3600) true)
check "a job in it starts" banyan job wait-event -t 20s "$past" start
behind=$(banyan submit --reservation brief -N1 true)
wait_for "the reservation ends" 10 sh -c "! banyan reservation list | grep -q '^brief '"
check_fails "a job still waiting in it ends, saying why" "reservation brief ended" banyan job wait "$behind"
check_output "the job runs on past its end" "^$past R" banyan jobs --no-header -o '{id} {st}'
banyan cancel "$past"
check "the list is empty" sh -c '[ "$(banyan reservation list | wc -l)" -eq 1 ]'
