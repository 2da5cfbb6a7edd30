#!/bin/bash
# A network partition cuts off a subtree while jobs run on it. Four hosts,
# each broker in its own network namespace on a bridge (ip netns, veth),
# fanout 2: rank 1 is the parent of rank 3, so taking rank 1's link down
# cuts off {1, 3}. Timings are scaled down: tbon.lost_timeout is 4 s, and
# rank 0 waits exec.reattach-timeout (3 s) for a lost rank. A partition
# shorter than the timeout costs no job: the job on all four ranks
# finishes as if nothing happened. One longer ends the job running there
# with node-failure within the two timeouts; when the link comes back the
# subtree rejoins, no task of the ended job is left on it, and a new job
# runs on all four.
. "$(dirname "$0")/../integration/lib.sh"

tag=bnp$$
make_hosts "$tag" 4
banyan keygen "$T_DIR/cert" >/dev/null
cat >"$T_DIR/cluster.toml" <<TOML
[bootstrap]
hosts = "node[0-3]"
port = 8050
curve_cert = "$T_DIR/cert"
[tbon]
fanout = 2
heartbeat_period = "0.2s"
torpid_timeout = "1s"
lost_timeout = "4s"
hello_timeout = "0.5s"
connect_max_backoff = "0.5s"
[exec]
reattach-timeout = "3s"
TOML
for i in 3 2 1 0; do host_broker "$tag" "$i" "$T_DIR/cluster.toml"; done
export BANYAN_URI="local://$T_DIR/node0/local.sock"
wait_for "four hosts joined" 20 sh -c "banyan overlay status -s | grep -q '^online: 0-3 (4)$'"
marker=$((RANDOM + 1000))

short=$(banyan submit -N4 -n4 sh -c 'sleep 4; echo "task $BANYAN_TASK_RANK done"')
wait_for "a job runs on all four" 20 sh -c "banyan job eventlog $short | grep -q ' start'"
ip -n "$tag-sw" link set sv1 down
sleep 2   # half the lost timeout
ip -n "$tag-sw" link set sv1 up
check "a 2 s partition of {1, 3}: the job completes" banyan job wait "$short"
check_output "with the output of all four tasks" "^4$" sh -c "banyan job attach $short | grep -c done"

long=$(banyan submit -N4 -n4 sleep "$marker")
wait_for "another job runs on all four" 20 sh -c "banyan job eventlog $long | grep -q ' start'"
ip -n "$tag-sw" link set sv1 down
cut=$(date +%s)
wait_for "past the timeout it ends with node-failure" 15 \
    sh -c "banyan job eventlog $long | grep -q 'exception.*type=node-failure'"
check "within the timeouts and a little (4 s + 3 s + 3 s)" test $(($(date +%s) - cut)) -le 10
# (One process namespace for all four hosts: what is left is the cut-off
# ranks' two tasks.)
wait_for "the tasks on ranks 0 and 2 end" 10 sh -c "[ \$(pgrep -fc '^sleep $marker\$') -le 2 ]"
ip -n "$tag-sw" link set sv1 up
wait_for "the subtree rejoins" 30 sh -c "banyan overlay status -s | grep -q '^online: 0-3 (4)$'"
wait_for "no task of the ended job is left on it" 15 sh -c "! pgrep -f '^sleep $marker\$'"
new=$(banyan submit -N4 -n4 true)
check "a new job runs on all four" banyan job wait "$new"
check "shutdown" banyan shutdown
no_brokers_left "no broker is left on any host" "$T_DIR"
