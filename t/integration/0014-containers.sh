#!/bin/bash
# The image (scripts/image) as a cloud team runs it: brokers in podman
# containers that find each other by DNS name in any start order, sized to
# their containers' limits; an MPI job across them; workers, interior
# brokers and rank 0 replaced; batch mode; elastic size; PID 1 reaps.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/containers.sh"

mkdir -p "$T_DIR/etc"
banyan keygen "$T_DIR/etc/curve.cert" >/dev/null
cat >"$T_DIR/etc/banyan.toml" <<'TOML'
[bootstrap]
hosts = "bnyt-[0-3]"
curve_cert = "/etc/banyan/curve.cert"
# Names in podman's own DNS zone: a bare name that is not there yet goes
# on to the upstream resolvers, which do not answer here, and the lookup
# waits for their timeouts (as a FQDN in a cluster's zone would not).
connect = "tcp://%h.dns.podman:%p"
[tbon]
tcp_timeout = "3s"
TOML
# Elastic: runs once 2 are up; the other 2 join when they come.
sed 's/^\[tbon\]/[broker]\nquorum = 2\n[tbon]/' "$T_DIR/etc/banyan.toml" >"$T_DIR/etc/elastic.toml"
podman volume create "bnyt-state-$$" >/dev/null
CLEANUP+=("podman volume rm -f bnyt-state-$$ >/dev/null 2>&1")

# node I [--config FILE] [-- COMMAND...]: broker I in container bnyt-I.
node() {
    local i=$1 config=/etc/banyan/banyan.toml
    shift
    if [ "${1:-}" = --config ]; then config=$2; shift 2; fi
    "${PODMAN_RUN[@]}" -d --name "bnyt-$i" --hostname "bnyt-$i" --network "$NET" --cpus "$CPUS" --memory 1g \
        -v "$T_DIR/etc:/etc/banyan:ro" -v "$BANYAN_MPI_DIR:/mpi:ro" -v "bnyt-state-$$:/var/lib/banyan" "$IMAGE" \
        banyan start --config "$config" --rundir /run/banyan --statedir /var/lib/banyan --log-level debug "$@" \
        >/dev/null
}
gone() { podman rm -f -t 0 "$@" >/dev/null 2>&1; }
all_gone() { gone bnyt-0 bnyt-1 bnyt-2 bnyt-3; }
at0() { podman exec bnyt-0 "$@"; }
full() { at0 banyan overlay status -s 2>/dev/null | grep -q "^online: 0-3 (4)$"; }
export -f at0 full
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }
# The brokers' last words, after a check that failed.
show_logs() {
    local c
    for c in "$@"; do
        echo "    -- $c:"
        podman logs --tail 12 "$c" 2>&1 | grep -v "failed to connect to syslog" | sed 's/^/    | /'
    done
}
# Whether container bnyt-I's own resolver answers for its parent's name
# now (rank 3's parent is rank 1; ranks 1 and 2 have rank 0).
parent_resolves() {
    local i=$1
    timeout 3 podman exec "bnyt-$i" getent ahostsv4 "bnyt-$(((i - 1) / 2)).dns.podman" >/dev/null 2>&1
}
export -f parent_resolves
dns_answers_all() { parent_resolves 1 && parent_resolves 2 && parent_resolves 3; }
export -f dns_answers_all
# tree_forms DESC SECONDS: the tree forms within SECONDS. podman's DNS
# server (aardvark-dns 1.4) has been seen to leave one container's queries
# unanswered for a minute after a reload (not understood; CI, 1 run in
# many), and no broker can join a parent whose name does not resolve. So
# when the tree has not formed, ask each container's own resolver: if one
# does not answer, say so, wait for it (2 minutes), and then the tree must
# form within the usual few seconds. Where every resolver answers, the
# brokers get those few seconds too, and then the failure is theirs.
tree_forms() {
    local desc=$1 seconds=$2 i
    local start=$SECONDS
    until full; do
        ((SECONDS - start >= seconds)) && break
        sleep 0.05
    done
    if full; then ok "$desc"; return 0; fi
    local deaf=""
    for i in 1 2 3; do parent_resolves "$i" || deaf+=" bnyt-$i"; done
    if [ -z "$deaf" ]; then
        # (DNS may have come back just now: the brokers get the usual
        # few seconds from here.)
        echo "# not formed in ${seconds}s, though every container resolves its parent's name now"
        wait_for "$desc (within 15 s more)" 15 full || show_logs bnyt-0 bnyt-1 bnyt-2 bnyt-3
        return
    fi
    echo "# not formed in ${seconds}s: podman's DNS does not answer$deaf for its parent's name; waiting for it"
    local asked=$SECONDS
    until dns_answers_all; do
        if ((SECONDS - asked >= 120)); then
            ok "$desc # SKIP podman's DNS did not answer$deaf in 2 minutes"
            return 0
        fi
        sleep 0.5
    done
    echo "# podman's DNS answers every container after $((SECONDS - asked)) s more"
    wait_for "$desc (once DNS answered)" 15 full || show_logs bnyt-0 bnyt-1 bnyt-2 bnyt-3
}

node 0 && node 1 && node 2 && node 3
wait_for "4 containers form the tree" 20 full
check_output "banyan in rank 0's container needs no BANYAN_URI" "^0: full" at0 banyan overlay status
check_output "resources are the containers' limits: $CPUS cores each" "^ +free +4 +$((4 * CPUS)) +0 bnyt-\[0-3\]$" \
    at0 banyan resource list
check_output "and 1 GiB of memory each" "this node: $CPUS cores, 0 gpus, 1024 MiB" podman logs bnyt-3
check_output "an MPI job runs across the containers" "^$((4 * CPUS))$" \
    sh -c "podman exec bnyt-0 banyan run -N4 -n$((4 * CPUS)) /mpi/mpi-hello | grep -c '^hello from rank'"
check_output "every container ran ranks" "^4$" \
    sh -c "podman exec bnyt-0 banyan run -N4 -n4 hostname | sort -u | wc -l"
check_output "the broker, PID 1, reaps orphans: no zombie left" "^0$" \
    at0 sh -c 'sh -c "sleep 0.1 &"; sleep 1; grep -l "^State:.Z" /proc/[0-9]*/status 2>/dev/null | wc -l'

check_output "a /dev/shm too small for MPI's local ranks is said in the job's output" \
    "^banyan-shell: warning: /dev/shm has [0-9]+ MiB free on .*; MPI needs about $((4 * CPUS)) MiB for $CPUS local" \
    "${PODMAN_RUN[@]}" --rm --network none --shm-size 2m "$IMAGE" banyan start --test-size=1 banyan run -n"$CPUS" true

# Killed and restarted: the worker comes back.
podman kill bnyt-3 >/dev/null
wait_for "a killed worker is lost" 10 sh -c "podman exec bnyt-0 banyan resource status | grep -Eq '^ +lost +1 +3 '"
gone bnyt-3 && node 3
wait_for "a restarted worker rejoins" 15 full || show_logs bnyt-3 bnyt-1

# An interior broker vanishes without a reset (its network cut first),
# then comes back on a new IP: its child must notice and follow.
old_ip=$(podman inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' bnyt-1)
cut=$(date +%s%N)
podman network disconnect -f "$NET" bnyt-1 >/dev/null && gone bnyt-1
node 1
new_ip=$(podman inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' bnyt-1)
check "the replacement has a new IP ($old_ip -> $new_ip)" test "$old_ip" != "$new_ip"
wait_for "its child, rank 3, notices that its parent vanished" 10 \
    sh -c "podman logs bnyt-3 2>&1 | grep -q 'lost parent rank 1: connection to the parent closed'"
# When, by the log's own clock (the host's).
lost_at=$(podman logs bnyt-3 2>&1 | grep 'lost parent rank 1: connection' | tail -1 | cut -c1-23)
noticed=$((($(date -d "${lost_at}Z" +%s%N) - cut) / 1000000))
# The first heartbeat after the cut (tbon.heartbeat_period, 2 s) goes
# unacknowledged; tbon.tcp_timeout (3 s) later the kernel closes the link.
check "within heartbeat_period + tcp_timeout (5 s) and a second: $noticed ms" test "$noticed" -lt 6000
# Then it looks up bnyt-1 again. podman's DNS server (aardvark-dns) has
# been seen to answer for a replaced container only after its upstream
# resolvers' timeouts (5 to 52 s here, where they are unreachable).
tree_forms "rank 1 and its child rank 3 rejoin" 90
echo "# rejoined $(ms_since "$cut") ms after rank 1 vanished"
check_output "rank 3 rejoined through the new rank 1" "joined parent rank 1" \
    sh -c "podman logs bnyt-3 2>&1 | grep 'joined parent' | tail -1"

# Rank 0 replaced, its state directory on a volume: jobs are kept.
done_job=$(at0 banyan submit true) && at0 banyan job wait "$done_job"
held=$(at0 banyan submit --urgency=0 true)
gone bnyt-0 && node 0
# The children re-resolve rank 0's name: podman's DNS can be late for a
# replaced container (as for rank 1 above), so as long as there.
tree_forms "a new rank 0 on the same volume: the tree forms again" 90
check_output "the finished job is still listed" "$done_job +CD" at0 banyan jobs -a -o '{id} {st}'
check_output "so is the held one" "$held +S" at0 banyan jobs -a -o '{id} {st}'
at0 banyan job urgency "$held" 16
check "released, it runs" at0 banyan job wait "$held"

# Started at the same instant, as Kubernetes starts pods: 10 times. A
# broker whose first lookups of its parent's name came before podman's DNS
# server knew it has gone on getting no answer for 10-30 s more (in 1 try
# of 10 or none), while the other brokers of the same try resolved the
# same name at once; not understood yet. The broker keeps asking, so every
# try must join, and most within the issue's 5 s.
# Timed from when podman has started all four (its own start, 1.7 s here
# unloaded, grows with the load of the tests beside this one), and, for
# the record, from the first podman run.
slowest=0 slowest_total=0 fast=0
for try in $(seq 10); do
    all_gone
    t0=$(date +%s%N)
    for i in 0 1 2 3; do node "$i" & done
    wait
    t1=$(date +%s%N)
    tree_forms "try $try: full" 60
    ms=$(ms_since "$t1")
    total=$(ms_since "$t0")
    [ "$ms" -gt "$slowest" ] && slowest=$ms
    [ "$total" -gt "$slowest_total" ] && slowest_total=$total
    [ "$ms" -lt 5000 ] && fast=$((fast + 1))
done
echo "# 4 containers started at once, 10 times: $fast joined within 5 s of podman starting them;" \
    "the slowest after $slowest ms ($slowest_total ms from the first podman run)"
check "at least 8 of 10 simultaneous starts joined within 5 s of podman starting them ($fast did)" test "$fast" -ge 8

all_gone
for i in 1 2 3; do node "$i"; done
sleep 2
t0=$(date +%s%N)
node 0
tree_forms "workers first, rank 0 last: the tree forms" 45
echo "# full $(ms_since "$t0") ms after rank 0 started"

# Batch mode: COMMAND at rank 0, then every broker exits 0 but rank 0,
# which exits with COMMAND's status.
all_gone
for i in 0 1 2 3; do node "$i" -- sh -c 'banyan run -N4 hostname | sort -u | wc -l; exit 3' & done
wait
check_output "batch: rank 0 exits with COMMAND's status" "^3$" timeout 60 podman wait bnyt-0
check_output "batch: every other broker exits 0" "^0 0 0$" \
    sh -c "echo \$(timeout 30 podman wait bnyt-1 bnyt-2 bnyt-3)"
check_output "batch: COMMAND ran across all 4" "^4$" sh -c "podman logs bnyt-0 2>/dev/null"

# Elastic: runs with 2 of 4; a 4-node job waits for the others to join.
all_gone
node 0 --config /etc/banyan/elastic.toml && node 1 --config /etc/banyan/elastic.toml
wait_for "2 of 4 up: the instance runs" 20 at0 banyan ready
check_output "the 2 absent hosts are unjoined, not lost" "unjoined +2 +2-3 " at0 banyan resource status
wide=$(at0 banyan submit -N4 hostname)
wait_for "a 4-node job waits for them, saying so" 10 \
    sh -c "podman exec bnyt-0 banyan jobs -o '{id} {st} {info}' | grep -q '$wide S waiting for drained, down or unjoined nodes'"
node 2 --config /etc/banyan/elastic.toml && node 3 --config /etc/banyan/elastic.toml
check "once they join, it runs" timeout 30 podman exec bnyt-0 banyan job wait "$wide"

# Scale down: a drained node leaves; no job fails for it.
at0 banyan resource drain 3 scale down >/dev/null
podman stop -t 10 bnyt-3 >/dev/null
check_output "a drained node that left stays drained" "drained +1 +3 .*scale down" at0 banyan resource status
check "and no job failed" sh -c "[ -z \"\$(podman exec bnyt-0 banyan jobs -a --filter=failed --no-header)\" ]"
