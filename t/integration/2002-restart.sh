#!/bin/bash
# Restart without loss: rank 0 is killed with SIGKILL in the middle of
# 5,000 submissions; restarted on the same state directory, every
# acknowledged job is there, a job that completed before the crash is not
# run again, a pending (held) job is still pending and then runs, and a
# running job ends with a clear `restart` exception.
. "$(dirname "$0")/lib.sh"

export STATE=$T_DIR/state
cat >"$T_DIR/before.sh" <<'SCRIPT'
set -u
cd "$T_DIR"
banyan submit true >done.id
banyan job wait "$(cat done.id)"
banyan submit --urgency=0 --job-name=solo true >held.id
banyan submit --dependency=singleton --job-name=solo true >singleton.id
banyan submit -S exec.test.run_duration=600 true >running.id
wait_for "the long job runs" 10 sh -c "banyan jobs --no-header -o '{st}' -f running | grep -q R"
# 5,000 submissions, each printed once acknowledged; kill -9 mid-stream
# (a thousand take under 200 ms here: fewer could all land before the kill).
banyan submit --cc=1-5000 -S exec.test.run_duration=0.01 true >acked.ids 2>submit.err &
submitter=$!
wait_for "submissions are under way" 30 sh -c "[ \$(wc -l <acked.ids) -ge 100 ]"
kill -9 "$(broker_pid "$(instance_dir)" 0)"
wait $submitter
echo "submitter exit $?" >>submit.err
SCRIPT
banyan start --test-size=1 --statedir "$STATE" bash "$T_DIR/before.sh" 2>"$T_DIR/start1.err"
check_output "the submitter was cut off by the crash" 'submitter exit [1-9]' cat "$T_DIR/submit.err"
acked=$(wc -l <"$T_DIR/acked.ids")
check "some but not all of the 5,000 were acknowledged ($acked)" test "$acked" -ge 100 -a "$acked" -lt 5000

cat >"$T_DIR/after.sh" <<'SCRIPT'
set -u
cd "$T_DIR"
banyan jobs -a --no-header -o '{id}' | sort >listed.ids
sort acked.ids >acked.sorted
check "every acknowledged job is there after the restart" \
    sh -c "[ -z \"\$(comm -23 acked.sorted listed.ids)\" ]"
check_output "the job completed before the crash still CD" '^CD$' \
    sh -c "banyan jobs -a --no-header -o '{id} {st}' | awk -v id=$(cat done.id) '\$1==id {print \$2}'"
check_output "and it did not run again (one start)" '^1$' sh -c "banyan job eventlog $(cat done.id) | grep -c ' start'"
check_output "the running job ended with a restart exception" 'restart: rank 0 restarted' \
    sh -c "banyan jobs -a --no-header -o '{id} {st} {info}' | grep $(cat running.id)"
check_output "the held job is still pending (S, held)" 'S held' \
    sh -c "banyan jobs --no-header -o '{id} {st} {info}' | grep $(cat held.id)"
check_output "the singleton still waits for the held job of its name" 'D depends on singleton' \
    sh -c "banyan jobs --no-header -o '{id} {st} {info}' | grep $(cat singleton.id)"
banyan job urgency "$(cat held.id)" 16
check "released, the held job runs" banyan job wait "$(cat held.id)"
check "and then the singleton" banyan job wait "$(cat singleton.id)"
check "the acknowledged jobs all complete" banyan job wait --all
new=$(banyan submit true)
newest=$(banyan jobs -a --no-header -o '{id.dec} {id}' | sort -n | tail -1 | cut -d' ' -f2)
check "a new id comes after every old one" test "$newest" = "$new"
SCRIPT
banyan start --test-size=1 --statedir "$STATE" bash "$T_DIR/after.sh"
