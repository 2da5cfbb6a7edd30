#!/bin/bash
# --requeue (jobs.md §3): a job that loses a node goes back to pending with
# its id and runs again on the nodes left, instead of ending with
# node-failure; its eventlog says why.
. "$(dirname "$0")/../integration/lib.sh"

start_cluster 3 $'heartbeat_period = "0.2s"\ntorpid_timeout = "1s"\nlost_timeout = "2s"'
marker=$((RANDOM + 1000))
id=$(banyan submit --requeue -N2 -n2 sleep "$marker")
wait_for "a job runs on two ranks" 20 sh -c "[ \$(pgrep -fc '^sleep $marker\$') -eq 2 ]"
# A rank of the job other than 0.
victim=$(banyan job info "$id" | python3 -c 'import json,sys; print(max(int(e["rank"].split("-")[-1]) for e in json.load(sys.stdin)["R"]["execution"]["R_lite"]))')
kill -9 "$(broker_pid "$T_DIR" $victim)"
wait_for "the job is requeued, not failed" 15 sh -c "banyan job eventlog $id | grep -q '^[^ ]* requeue '"
check_output "... saying why" "requeue note=node failure, requeued \(--requeue\): " banyan job eventlog "$id"
wait_for "it starts again, on the ranks left" 20 sh -c "[ \$(banyan job eventlog $id | grep -c '^[^ ]* start') -eq 2 ]"
check "no exception was raised" lacks "exception" banyan job eventlog "$id"
check_output "it runs with its id" "^$id R$" sh -c "banyan jobs --no-header -o '{id} {st}' | grep '^$id '"
check_output "... not on rank $victim" '^0$' sh -c "banyan job info $id | python3 -c 'import json,sys; print(sum(1 for e in json.load(sys.stdin)[\"R\"][\"execution\"][\"R_lite\"] if \"$victim\" in e[\"rank\"]))'"
check "cancel" banyan cancel "$id"
check "shutdown" banyan shutdown
pkill -f "^sleep $marker\$"
no_brokers_left "every broker exited" "$T_DIR"
