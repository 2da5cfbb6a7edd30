#!/bin/bash
# What Flux and Slurm users type without thinking works, and what is wrong
# is one line that names it: an unknown option before COMMAND, "--",
# --quiet, --wait, --watch, -J, -x without -N, a bad or unknown -o shell
# option (refused at submit), --cc and environment limits, --begin-time,
# --signal=SIG@TIME.
. "$(dirname "$0")/lib.sh"

lstopo-no-graphics -i "pack:1 core:2 pu:1" --of xml "$T_DIR/node.xml" 2>/dev/null
for i in $(seq 200); do printf 'BIG%d=%100000d\n' "$i" 0; done >"$T_DIR/bigenv"

inside() {
    # What can never run here is refused at submit, in one line, and no
    # job is made (the node has 2 cores and no GPU).
    check_fails "a task larger than any node is refused, naming the shortfall" \
        "^banyan submit: unsatisfiable: a task needs 3 cores on one node; the largest node has 2$" \
        banyan submit -n1 -c3 true
    check_fails "... with banyan run too" "^banyan run: unsatisfiable: a task needs 3 cores on one node" \
        banyan run -n1 -c3 true
    check_fails "a constraint no node meets is refused at submit" \
        "^banyan submit: unsatisfiable: no node satisfies 'host:no-such-host'$" \
        banyan submit --requires=host:no-such-host true
    check_fails "GPUs the graph lacks are refused at submit" "^banyan submit: .*'gpu'" banyan submit -n1 -g3 true
    check_output "none of them made a job" "^0$" sh -c "banyan jobs -a --no-header | wc -l"
    check_fails "an unknown option before COMMAND is an error naming it" \
        "^banyan submit: --bogus: unknown option \(COMMAND starts at the first word that is not an option, or after --\)$" \
        banyan submit --bogus --cc=1-3 true
    check_output "and nothing was submitted" "^0$" sh -c "banyan jobs -a --no-header | wc -l"
    check "--quiet --cc=1-3 submits three jobs and prints nothing" sh -c 'test -z "$(banyan submit --quiet --cc=1-3 true)"'
    check_output "three jobs of command true" "^3 true$" sh -c "banyan jobs -a --no-header -o '{name}' | sort | uniq -c | sed 's/^ *//'"
    check_output "-- starts COMMAND, which may start with -" "^banyan: job .*: exec: -weird: " banyan run -- -weird
    check_output "options after COMMAND are COMMAND's" "^-x$" banyan run -n1 -- sh -c 'echo $0' -x
    check_output "a -- inside COMMAND is COMMAND's" "^a -- -x$" banyan run echo a -- -x
    check_output "--wait exits with the job's code" "^rc=3$" sh -c 'banyan submit --wait --quiet sh -c "exit 3"; echo rc=$?'
    check_output "--watch streams each job's output" "^hi1 hi2 rc=0$" \
        sh -c 'echo $(banyan submit --watch --quiet --cc=1-2 echo hi{cc}) rc=$?'
    # (Its own row: jobs submitted above without waiting may still be active,
    # and active jobs are listed first.)
    check_output "-J names the job" "^myname$" \
        sh -c 'id=$(banyan submit -J myname true); banyan jobs -a --no-header -o "{id} {name}" | awk -v id="$id" "\$1 == id {print \$2}"'
    check_output "-x without -N gets one whole node: both its cores" '"core": "0-1"' \
        sh -c 'banyan job info $(banyan submit --wait --quiet -x true; banyan jobs -a -n1 --no-header -o "{id}")'
    check_fails "a bad shell option is refused at submit" \
        '^banyan submit: -o cpu-affinity="sometimes": expected on, per-task or off$' \
        banyan submit -o cpu-affinity=sometimes true
    check_fails "so is a misspelt one" "^banyan submit: -o cpu-afinity: unknown shell option" \
        banyan submit -o cpu-afinity=off true
    check_fails "--cc past the limit says so" "^banyan submit: --cc 1-10000000: 10000000 jobs; one submit makes at most 100000$" \
        banyan submit --cc=1-10000000 true
    check_fails "a 20 MB environment says which limit it hit" \
        "^banyan submit: the job is 19.[0-9] MiB, its environment 19.[0-9] MiB; a job may be at most 16 MiB" \
        banyan submit --env="^$T_DIR/bigenv" true

    local begin id start
    begin=$(date +%s.%N)
    id=$(banyan submit --begin-time=+2 true)
    check_output "--begin-time: the job waits, and says for what" "^depend depends on begin-time:[0-9-]+T[0-9:]+$" \
        banyan jobs -n1 --no-header -o "{state} {info}"
    check "it runs once the time has come" banyan job wait "$id"
    start=$(banyan job eventlog "$id" | awk '/ depend$/ {print $1}')
    check "not before: depend came 2 s or more after the submit" \
        awk -v t="$(date -d "$start" +%s.%N)" -v b="$begin" 'BEGIN { exit !(t - b >= 1.95) }'
    check_fails "a time that is none is refused in one line" \
        "^banyan submit: --begin-time tomorrowish: not a time \(expected now, \+DURATION, @EPOCH, HH:MM\[:SS\] or YYYY-MM-DD\[ HH:MM\[:SS\]\]\)$" \
        banyan submit --begin-time=tomorrowish true
    cat >"$T_DIR/trap.sh" <<'TRAP'
trap 'echo got USR2; exit 0' USR2
for i in $(seq 100); do sleep 0.1; done
echo no signal
TRAP
    # 2 s after the start: time for bash to set its trap on a busy machine.
    check_output "--signal=USR2@8: the tasks get SIGUSR2 8 s before a 10 s limit" "^got USR2$" \
        banyan run -t 10s --signal=USR2@8 bash "$T_DIR/trap.sh"
    check_fails "--signal without a time limit is refused" "^banyan submit: --signal=USR1@60: needs a time limit \(-t\)" \
        banyan submit --signal=USR1@60 true
    check_fails "--signal with no signal is refused naming it" "^banyan submit: --signal NOPE: not a signal" \
        banyan submit -t 1m --signal=NOPE@10 true
    check_fails "a bad signal option in a jobspec is refused at submit" "^banyan submit: -o signal=" \
        banyan submit -t 1m -o signal=7 true
}
export -f inside

if banyan start --test-size=1 -S "resource.hwloc_xml=$T_DIR/node.xml" bash -c inside; then ok "instance ran"; else not_ok "instance ran"; fi
