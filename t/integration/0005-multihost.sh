#!/bin/bash
# Three hosts, each broker in its own network namespace with its own
# address and host name (ip netns + veth + a bridge, unshare --uts), over
# TCP with CURVE. Ranks come from the host names; followers start first;
# a killed follower is lost and rejoins; when rank 0's host comes back on
# a new address, followers find it again by name.
. "$(dirname "$0")/lib.sh"

tag=bny$$
make_hosts "$tag" 3

banyan keygen "$T_DIR/cert" >/dev/null
cat >"$T_DIR/cluster.toml" <<TOML
[bootstrap]
hosts = "node[0-2]"
port = 8050
curve_cert = "$T_DIR/cert"
[tbon]
fanout = 2
heartbeat_period = "0.2s"
lost_timeout = "1.5s"
hello_timeout = "0.5s"
connect_max_backoff = "0.5s"
TOML

export BANYAN_URI="local://$T_DIR/node0/local.sock"
status_is() { banyan overlay status -s | grep -q "^$1$"; }
export -f status_is

host_broker "$tag" 2 "$T_DIR/cluster.toml"
host_broker "$tag" 1 "$T_DIR/cluster.toml"
sleep 0.5
host_broker "$tag" 0 "$T_DIR/cluster.toml"
wait_for "three hosts joined over TCP+CURVE, rank 0 last" 15 status_is "online: 0-2 (3)"
check_output "rank 2 is reached through the tree" "route=client!0!2 " banyan ping 2
check_output "each broker took its rank from its host name" "rank 1 \(node1\) joined" banyan dmesg
check_output "node0's broker listens in its own namespace" "(\*|0\.0\.0\.0):8050" \
    ip netns exec "$tag-n0" ss -ltnH

kill -KILL "$(pgrep -f -- "--rundir $T_DIR/node1( |$)")"
wait_for "kill -9 of node1: lost" 10 status_is "lost: 1 (1)"
host_broker "$tag" 1 "$T_DIR/cluster.toml"
wait_for "node1 restarted: back in the tree" 15 status_is "online: 0-2 (3)"

# Rank 0's host moves to a new address, as a pod does when it is rescheduled.
kill -KILL "$(pgrep -f -- "--rundir $T_DIR/node0( |$)")"
ip -n "$tag-n0" addr del "${HOST_ADDR[0]}/24" dev eth0
HOST_ADDR[0]=$(host_addr 20)
ip -n "$tag-n0" addr add "${HOST_ADDR[0]}/24" dev eth0
write_hosts "$tag"
host_broker "$tag" 0 "$T_DIR/cluster.toml"
wait_for "rank 0 on a new address: followers find it by name" 20 status_is "online: 0-2 (3)"
check_output "and rank 2 answers" "route=client!0!2 " banyan ping 2

check "banyan shutdown stops every host's broker" banyan shutdown
no_brokers_left "no broker is left on any host" "$T_DIR"
