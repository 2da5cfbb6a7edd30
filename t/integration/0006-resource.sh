#!/bin/bash
# Resources in a 4-broker instance whose ranks have four different node
# shapes (hwloc XML per rank): resource list totals are their sum; drain
# and undrain, with reasons that survive a restart with the same state
# directory; a lost node is down; a simulated cluster from config.
. "$(dirname "$0")/lib.sh"

data=${BANYAN_SOURCE_DIR:-$(dirname "$0")/../..}/t/data/hwloc
lstopo-no-graphics -i "pack:1 core:2 pu:1" --of xml "$T_DIR/rank0.xml" 2>/dev/null
lstopo-no-graphics -i "pack:2 core:4 pu:1" --of xml "$T_DIR/rank1.xml" 2>/dev/null
lstopo-no-graphics -i "pack:2 [numa(memory=4294967296)] core:8 pu:2" --of xml "$T_DIR/rank2.xml" 2>/dev/null
cp "$data/two-gpu-node.xml" "$T_DIR/rank3.xml"
# 2 + 8 + 16 + 4 cores; the last node has 2 GPUs.
shapes=(-S "resource.hwloc_xml=$T_DIR/rank%r.xml" --statedir "$T_DIR/state")

first() {
    check_output "resource list sums the four shapes" \
        "^ +free +4 +30 +2 " banyan resource list
    check_output "--json has the same totals" '"free":\{"ncores":30,"ngpus":2,"nnodes":4' banyan resource list --json
    check_output "resource R has each rank's cores and GPUs" \
        '\{"children":\{"core":"0-3","gpu":"0-1"\},"rank":"3"\}' banyan resource R
    check "drain rank 2 with a reason" banyan resource drain 2 bad dimm on slot 3
    check_output "a drained node is down in the list" "^ +down +1 +16 +0 " banyan resource list
    check_output "status shows the reason" "drained +1 +2 .*bad dimm on slot 3 \(" banyan resource status
    check_fails "undrain of a node that is not drained names it" "rank 1 \(.*\) is not drained" \
        banyan resource undrain 1
    check_fails "drain of an unknown host names it" "no host 'nosuch' in this instance" \
        banyan resource drain nosuch
    check_fails "drain of a rank beyond the instance names it" "no rank 9 in this instance" banyan resource drain 9
    # A host name all four brokers share: which ranks it matched is said,
    # and rank 2 keeps its own reason.
    host=$(banyan resource status --json | grep -o '"nodelist":"[^",[]*' | head -1 | cut -d'"' -f4)
    banyan resource drain "$host" test >"$T_DIR/drain.out" 2>&1
    check_output "drain by a shared host name says which ranks it drained" "^drained rank 0-1,3$" cat "$T_DIR/drain.out"
    check_output "... and which kept their reason" "^rank 2 drained already: its reason is kept" cat "$T_DIR/drain.out"
    check_output "rank 2's reason is its own still" "drained +1 +2 .*bad dimm on slot 3 \(" banyan resource status
    check_output "the others have the new one" "drained +3 +0-1,3 .*test \(" banyan resource status
    check_output "undrain says which ranks" "^undrained rank 0-1,3$" banyan resource undrain 0-1,3
    kill -KILL "$(broker_pid "$(instance_dir)" 1)"
    # Rank 3 sits behind rank 1: unreachable, so down too.
    wait_for "a lost node and the one behind it are down" 10 \
        sh -c "banyan resource list | grep -Eq '^ +down +3 +28 +2 '"
    check_output "and lost in status" "lost +2 1,3 " banyan resource status
}
second() {
    check_output "after a restart with the same statedir, rank 2 is still drained" \
        "drained +1 +2 .*bad dimm on slot 3" banyan resource status
    check "undrain it" banyan resource undrain 2
    check_output "all four are free again" "^ +free +4 +30 +2 " banyan resource list
}
export -f first second

if banyan start --test-size=4 "${shapes[@]}" bash -c first; then ok "first instance"; else not_ok "first instance"; fi
if banyan start --test-size=4 "${shapes[@]}" bash -c second; then ok "restarted instance"; else not_ok "restarted instance"; fi

check_output "a simulated cluster from config: 16 nodes of 2x32 cores, 2x4 GPUs" "^ +free +16 +1024 +128 node\[0-15\]$" \
    banyan start --test-size=1 -S 'resource.synthetic="node[0-15]: socket:2,core:32,gpu:4,memory:256G"' \
    banyan resource list
check_fails "a bad synthetic description stops the broker with a clear error" "synthetic 'node\[0-1\]: fpga:2': unknown type 'fpga'" \
    banyan start --test-size=1 --wait-timeout=5 -S 'resource.synthetic="node[0-1]: fpga:2"' true
check_output "resource.exclude leaves hosts out" "^ +free +8 +512 +64 node\[0-7\]$" \
    banyan start --test-size=1 -S 'resource.synthetic="node[0-15]: socket:2,core:32,gpu:4"' \
    -S 'resource.exclude="node[8-15]"' banyan resource list
cat >"$T_DIR/R.json" <<'JSON'
{"version": 1, "execution": {"R_lite": [{"rank": "0-2", "children": {"core": "0-7", "gpu": "0"}}],
 "nodelist": ["big[1-3]"], "starttime": 0, "expiration": 0}}
JSON
check_output "resource.path reads the cluster from an R file" "^ +free +3 +24 +3 big\[1-3\]$" \
    banyan start --test-size=1 -S "resource.path=$T_DIR/R.json" banyan resource list
echo '{"version": 1, "execution": {"R_lite": [{"rank": "0", "children": {"core": "5-1"}}]}}' >"$T_DIR/bad.json"
check_fails "a bad R file stops the broker with the key that is wrong" "R_lite\[0\].children.core: idset '5-1'" \
    banyan start --test-size=1 --wait-timeout=5 -S "resource.path=$T_DIR/bad.json" true
check_output "a drain whose reason is not a string is refused, and the broker lives on" \
    "^error 71: resource.drain.reason: expected a string$" \
    banyan start --test-size=1 sh -c 'banyan-test-client rpc resource.drain "{\"targets\":\"0\",\"reason\":5}"; banyan ping 0 >/dev/null'
check_output "a publish with a bad private flag is refused" "^error 71: event.publish: private: expected true or false$" \
    banyan start --test-size=1 banyan-test-client rpc event.publish '{"topic":"a.b","private":"yes"}'
