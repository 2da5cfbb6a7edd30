#!/bin/bash
# A rolling upgrade (doc/spec/overlay.md §3.1): a 4-broker instance of
# banyan-broker-previous (the overlay protocol before this one) runs a long
# job on all four ranks; each broker in turn, leaves first and rank 0 last,
# is stopped (SIGTERM: it leaves alone, keeping its jobs) and started again
# as the current banyan-broker, and a new job is run across the mixed
# instance after each step. No job is killed or lost: the long job runs on
# to its own end. Peers more than one protocol version apart are refused
# with one line naming both.
. "$(dirname "$0")/../integration/lib.sh"

previous=$(command -v banyan-broker-previous)
[ -x "$previous" ] || { not_ok "the build has banyan-broker-previous"; exit 1; }
# A broker below rank 0 waits tbon.lost_timeout (overlay.md §9) for a
# parent that restarts: 30 s here, for slow restarts on a busy machine.
BANYAN_BROKER=$previous start_cluster 4 \
    $'heartbeat_period = "0.2s"\ntorpid_timeout = "1s"\nlost_timeout = "30s"\n[exec]\nreattach-timeout = "60s"'
protocol_of() { BANYAN_URI=$(uri_of "$1") banyan-test-client rpc broker.info '{}' | jq -r .protocol; }
old=$(protocol_of 0)
new=$((old + 1))
check_output "the instance runs the previous protocol on every rank" "^$old $old $old $old \$" \
    sh -c "for r in 0 1 2 3; do BANYAN_URI=$(uri_of 0) banyan-test-client rpc broker.info '{}' \$r | jq -r .protocol; done | tr '\n' ' '"
marker=$((RANDOM + 1000))
write_waiting_task
tasks_are() { waiting_tasks_are "$T_DIR/go-$marker" "$1"; }
long=$(banyan submit -N4 -n4 bash "$T_DIR/task.sh" "$T_DIR/go-$marker")
wait_for "the long job runs on all four ranks" 30 tasks_are 4

port=$(sed -n 's/^port = //p' "$T_DIR/c.toml")
short_jobs=()
for r in 3 2 1 0; do
    kill -TERM "$(broker_pid "$T_DIR" "$r")"
    wait_for "rank $r (previous) exited" 10 sh -c "! pgrep -f -- '--rundir $T_DIR/rank-$r( |\$)' >/dev/null"
    if [ "$r" = 3 ]; then
        # Rank 3's parent is rank 1, which still speaks the previous protocol.
        check_output "a peer two versions above is refused, naming both" \
            "^error 71: rank 3 speaks overlay protocol $((old + 2)) and rank 1 protocol $old: brokers more than one version apart do not interoperate" \
            banyan-test-client hello "tcp://127.0.1.1:$port" "$T_DIR/cert" 3 $((old + 2))
        check_output "rank 1 logged the refusal" "refused hello from rank 3: rank 3 speaks overlay protocol $((old + 2))" \
            cat "$T_DIR/rank-1.log"
    fi
    check "the long job's tasks still run" tasks_are 4
    start_broker "$T_DIR/c.toml" "$r"
    wait_for "rank $r is back, upgraded" 30 all_up 4
    check_output "rank $r speaks protocol $new" "^$new\$" protocol_of "$r"
    check_output "the long job still runs" "^$long R$" sh -c "banyan jobs --no-header -o '{id} {st}' | grep '^$long '"
    short=$(banyan submit -N4 -n4 hostname)
    short_jobs+=("$short")
    check "a new job runs on the mixed instance (step $r)" timeout 30 banyan job wait "$short"
done
check "every broker is the current one" test "$(pgrep -fc -- "banyan-broker-previous.*$T_DIR")" = 0
check_output "all four speak protocol $new" "^$new $new $new $new \$" \
    sh -c "for r in 0 1 2 3; do BANYAN_URI=$(uri_of 0) banyan-test-client rpc broker.info '{}' \$r | jq -r .protocol; done | tr '\n' ' '"
check "the long job's four tasks still run" tasks_are 4
touch "$T_DIR/go-$marker"
check "the long job ends on its own, with status 0" timeout 30 banyan job wait "$long"
check "no exception was raised on it" lacks "exception" banyan job eventlog "$long"
check_output "all four tasks wrote to their end" "^4$" sh -c "banyan job attach $long | grep -c 'ends$'"
check_output "every job submitted is there and ended 0: none lost" "^5$" \
    sh -c "banyan jobs -a --no-header -o '{id} {st}' | grep -c ' CD$'"
# Upgraded rank 1 refuses a peer two versions below it as well.
kill -TERM "$(broker_pid "$T_DIR" 3)"
wait_for "rank 3 exited" 10 sh -c "! pgrep -f -- '--rundir $T_DIR/rank-3( |\$)' >/dev/null"
check_output "a peer two versions below is refused, naming both" \
    "^error 71: rank 3 speaks overlay protocol $((new - 2)) and rank 1 protocol $new: brokers more than one version apart" \
    banyan-test-client hello "tcp://127.0.1.1:$port" "$T_DIR/cert" 3 $((new - 2))
check "shutdown" banyan shutdown
no_brokers_left "every broker exited" "$T_DIR"
