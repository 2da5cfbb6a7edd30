#!/bin/bash
# Memory as a resource (sched.md §4, shell.md §1.2): --mem (per node) and
# --mem-per-cpu are scheduled like cores, so two jobs that each need 60 %
# of a node never share one while a third waits for memory, not cores; R
# carries each rank's memory; bad sizes are refused in one line and
# nothing is stored. Then on this machine, for real: a job over its --mem
# is killed by the kernel and fails with an `oom` exception, while a job
# beside it on the same node lives on.
. "$(dirname "$0")/lib.sh"
cd "$T_DIR"

# R_lite of a job, one entry a line: "RANK MEMORY" (0 without memory).
cat >r-memory.py <<'PY'
import json, sys
for e in json.load(sys.stdin)["R"]["execution"]["R_lite"]:
    print(e["rank"], e.get("memory", 0))
PY

cat >packed.sh <<'SCRIPT'
set -u
sim="-t 1h -S exec.test.run_duration=3600"
a=$(banyan submit --mem=6G $sim true)
b=$(banyan submit --mem=6G $sim true)
c=$(banyan submit --mem=6G $sim true)
d=$(banyan submit -n2 --mem-per-cpu=1536M $sim true)
echo "$a $b $c $d" >ids
banyan job wait-event "$b" start >/dev/null
banyan job wait-event "$d" start >/dev/null
for j in $a $b $d; do banyan job info "$j" | python3 r-memory.py; done >r.before
banyan jobs --no-header -o '{id} {st}' >listing.before
banyan jobs -a --no-header | wc -l >count.before
banyan submit --mem=5 true >bad.unit 2>&1
banyan submit --mem=11G true >bad.over 2>&1
banyan submit --mem=1G --mem-per-cpu=1G true >bad.both 2>&1
banyan submit --mem=0G true >bad.zero 2>&1
banyan submit --mem=4X true >bad.suffix 2>&1
banyan jobs -a --no-header | wc -l >count.after
banyan cancel "$a"
banyan job wait-event "$c" start >/dev/null
banyan job info "$c" | python3 r-memory.py >r.third
banyan cancel "$b" "$c" "$d"
banyan job wait --all
SCRIPT
check "an instance of two simulated 10 GiB nodes packs jobs by memory" \
    banyan start --test-size=2 -S 'resource.synthetic="node[0-1]: core:4,memory:10G"' bash packed.sh
read -r a b c d <ids
check_output "each 6 GiB job holds 6 GiB in R, on a node of its own" '^0 6442450944$' sed -n 1p r.before
check_output "... the second on the other node" '^1 6442450944$' sed -n 2p r.before
check_output "two tasks of --mem-per-cpu=1536M share a node's memory: 3 GiB there" '^[01] 3221225472$' \
    sed -n 3p r.before
check_output "a third 6 GiB job waits though cores are free" "^$c S$" grep "^$c " listing.before
check_output "... and starts on the node the first one freed" '^0 6442450944$' cat r.third
check_output "a size without a unit is refused in one line" \
    "^banyan submit: --mem '5': a size needs a unit: K, M, G or T \(as 512M or 4G\)$" cat bad.unit
check_output "more memory than any node has is refused, in bytes" \
    '^banyan submit: unsatisfiable: a task needs 11 GiB of memory on one node; the largest node has 10 GiB$' \
    cat bad.over
check_output "memory per node and per core together are refused" \
    '^banyan submit: --mem 1G: give memory per node or per core, not both$' cat bad.both
check_output "zero is refused" "--mem '0G': a size must be more than 0" cat bad.zero
check_output "an unknown unit is refused" "--mem '4X': unknown unit" cat bad.suffix
for f in bad.unit bad.over bad.both bad.zero bad.suffix; do
    check_output "$f: one line" '^1$' sh -c "wc -l <$f"
done
check "nothing refused was stored" cmp count.before count.after

# For real: this machine's memory, its kernel's cgroups.
cat >oom.sh <<'SCRIPT'
set -u
beside=$(banyan submit --mem=64M sh -c 'while [ ! -e beside.go ]; do sleep 0.05; done; echo beside lived')
banyan job wait-event "$beside" start >/dev/null
hog=$(banyan submit --mem=64M python3 -c 'b = bytearray(400 << 20); print("hog survived")')
echo "$hog" >hog.id
banyan job wait "$hog" >hog.wait 2>&1; echo $? >hog.rc
banyan job attach "$hog" >hog.out 2>&1
banyan job eventlog "$hog" >hog.eventlog
banyan job info "$hog" | python3 r-memory.py >hog.r
touch beside.go
banyan job wait "$beside" >beside.wait 2>&1; echo $? >beside.rc
banyan job attach "$beside" >beside.out 2>&1
fits=$(banyan submit --mem=256M python3 -c 'b = bytearray(64 << 20); print("fits")')
banyan job wait "$fits"; echo $? >fits.rc
banyan job attach "$fits" >fits.out 2>&1
banyan jobs -a --no-header -o '{id} {result} {info}' >results
SCRIPT
check "an instance on this machine runs jobs with --mem" banyan start --test-size=1 bash oom.sh
if grep -q "does not limit this job's memory" hog.out; then
    # What needs no controller was checked above.
    echo "skip: no memory controller this broker may use here: $(grep 'does not limit' hog.out)"
    exit 0
fi
check_output "R gives the job 64 MiB" '^0 67108864$' cat hog.r
check_output "a job over its --mem fails with an oom exception that says so" \
    "oom: out of memory on rank 0: the kernel killed 1 process of the job for using more than its 64 MiB here \(--mem\)" \
    cat hog.wait
check "... and exits non-zero" test "$(cat hog.rc)" != 0
check "... its task never got past the allocation" lacks "hog survived" cat hog.out
check_output "the exception is in its eventlog, by type" 'exception .*severity=0 type=oom' cat hog.eventlog
check_output "banyan jobs shows the job failed by oom" "^$(cat hog.id) failed oom: out of memory on rank 0" cat results
check_output "the job beside it on the same node lived on" '^beside lived$' cat beside.out
check "... and succeeded" test "$(cat beside.rc)" = 0
check_output "a job within its --mem runs as before" '^fits$' cat fits.out
