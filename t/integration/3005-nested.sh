#!/bin/bash
# Nested instances (doc/spec/instances.md): banyan batch with directives
# running 50 jobs and MPI jobs inside, the instance's resources equal to
# its job's R, banyan alloc, two levels of nesting, banyan --job/proxy from
# outside, the enclosing time limit cutting the jobs inside, a cancel that
# leaves no process, and bad scripts refused with one line.
. "$(dirname "$0")/lib.sh"

MPI_DIR=${BANYAN_MPI_DIR:-}
if [ -z "$MPI_DIR" ] || [ ! -x "$MPI_DIR/mpich-hello" ]; then
    echo "the MPI test programs are not built (BANYAN_MPI_DIR)"
    exit 1
fi
export MPI_DIR
export OMPI_MCA_mpi_yield_when_idle=1
# Every broker is on this host: ranks talk over loopback. A bridge that a
# container test adds or removes meanwhile must not be Open MPI's choice
# (an allreduce failed once binding to a podman bridge being torn down).
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo

cat >"$T_DIR/steps.sh" <<'SCRIPT'
#!/bin/bash
#BANYAN -N2 -t 10m
# an ordinary comment between directives
#BANYAN --job-name=steps
echo "args: $*"
banyan resource list | awk '$1 == "free" {print $1, $2, $3, $5}'
banyan submit --cc 1-50 --quiet --wait sh -c 'exit 0' && echo "50 jobs: ok"
banyan run -N2 -n4 "$MPI_DIR/mpich-hello" | grep -c 'of 4 on' | sed 's/^/mpich ranks: /'
banyan run -N2 -n4 "$MPI_DIR/mpi-hello" | grep -c 'of 4 on' | sed 's/^/openmpi ranks: /'
echo "completed: $(banyan jobs -a --no-header -o '{st}' | grep -c CD)"
exit 3
SCRIPT

cat >"$T_DIR/nested.sh" <<'SCRIPT'
set -u
cd "$T_DIR"
id=$(banyan batch "$T_DIR/steps.sh" one 'two words') || exit 1
check "banyan batch prints one job id" test -n "$id"
check "... the script's exit status is the job's" sh -c "banyan job wait $id; test \$? = 3"
out="$T_DIR/banyan-$id.out"
check "... its output goes to banyan-ID.out in the cwd" test -s "$out"
check_output "... it gets its arguments" '^args: one two words$' cat "$out"
check_output "... its instance holds exactly the job's 2 nodes (whole, -N alone), 8 cores" '^free 2 8 ' cat "$out"
check_output "... 50 jobs ran inside" '^50 jobs: ok$' cat "$out"
check_output "... all 50 completed, and the two MPI jobs" '^completed: 52$' cat "$out"
check_output "... MPICH across the instance's 2 brokers through PMI-1" '^mpich ranks: 4$' cat "$out"
check_output "... Open MPI across them through PMIx" '^openmpi ranks: 4$' cat "$out"
check_output "... the job is named by its directive; it failed with the script's status" '^steps F 3$' banyan jobs -a --no-header -o '{name} {st} {status}'

# Resources: an instance of -n3 slots holds the job's 3 cores.
cat >"$T_DIR/count.sh" <<'INNER'
#!/bin/sh
banyan resource list | awk '$1 == "free" {print $1, $3}'
INNER
id=$(banyan batch -n3 --output="$T_DIR/count.out" "$T_DIR/count.sh")
banyan job wait "$id" >/dev/null
check_output "an instance of -n3 has the job's 3 cores, no more" '^free 3$' cat "$T_DIR/count.out"

# --cc: a batch script submitted once per index, {cc} in its arguments.
printf '#!/bin/sh\necho copy "$1"\n' >"$T_DIR/copy.sh"
banyan batch --cc=1-2 --output="$T_DIR/copy-{{id}}.out" "$T_DIR/copy.sh" '{cc}' >"$T_DIR/copies.id"
check_output "batch --cc prints one id per copy" "^2$" sh -c "wc -l <'$T_DIR/copies.id'"
for copy in $(cat "$T_DIR/copies.id"); do banyan job wait "$copy" >/dev/null; done
check_output "each copy got its index" "^copy 1 copy 2$" sh -c "cat '$T_DIR'/copy-*.out | sort | paste -sd' '"
check_output "... and the job's R held 3 cores" '"core"' sh -c "banyan job info $id"

check_output "banyan alloc runs its command in the instance" '^ *free +1 +4 ' banyan alloc -N1 banyan resource list
check_output "banyan alloc with no command runs a shell reading stdin; its status is alloc's" '^status 4$' \
    sh -c "echo 'banyan resource list >/dev/null && exit 4' | SHELL=/bin/sh banyan alloc -N1; echo status \$?"
check_output "two levels: an instance inside an instance inside this one" '^level 2: 1 node$' \
    banyan alloc -N2 banyan alloc -N1 sh -c 'echo "level 2: $(banyan resource list | awk "\$1 == \"free\" {print \$2}") node"'

# From outside: banyan --job ID and banyan proxy ID reach the instance.
cat >"$T_DIR/long.sh" <<INNER
#!/bin/sh
banyan submit -N2 sleep 3171 >/dev/null
banyan submit -N2 sleep 3172 >/dev/null
banyan batch -n1 --output=/dev/null "$T_DIR/inner.sh" >"$T_DIR/inner.id"
sleep 3170
INNER
cat >"$T_DIR/inner.sh" <<'INNER'
#!/bin/sh
banyan submit sleep 3173 >/dev/null
sleep 3170
INNER
id=$(banyan batch -N2 --output=/dev/null "$T_DIR/long.sh")
wait_for "the batch job's instance runs a job" 20 sh -c "banyan --job $id jobs --no-header | grep -q ' R '"
check_output "banyan --job ID jobs lists the instance's 2 jobs" '^2$' sh -c "banyan --job $id jobs --no-header | grep -c 'sleep  *R'"
check_output "banyan proxy ID COMMAND runs against it: 5 of the instance's 8 cores allocated (two jobs, one instance)" '^allocated 2 5$' \
    sh -c "banyan proxy $id banyan resource list | awk '\$1 == \"allocated\" {print \$1, \$2, \$3}'"
wait_for "... and a batch job inside it runs one of its own" 20 sh -c "test -s $T_DIR/inner.id && banyan --job $id/\$(cat $T_DIR/inner.id) jobs --no-header | grep -q ' R '"
check_output "banyan --job ID1/ID2 reaches the instance inside the instance" 'sleep +R' \
    sh -c "banyan --job $id/$(cat "$T_DIR/inner.id") jobs --no-header"
check_output "banyan jobs shows the job as an instance" "instance on " banyan jobs --no-header
check_output "{instance} is its URI" '^local:///.*/local.sock$' banyan jobs --no-header -o '{instance}'
check_output "banyan proxy sets BANYAN_URI to reach it through this instance" "^local://${BANYAN_URI#local://}#$id\$" \
    banyan proxy "$id" sh -c 'echo $BANYAN_URI'
check_output "... and the instance's jobs are reached that way" '^2$' \
    sh -c "banyan proxy $id sh -c 'banyan jobs --no-header | grep -c \"sleep  *R\"'"
check_fails "banyan --job of a job that is no instance: one line" 'is not an instance' \
    banyan --job "$(banyan submit true)" jobs
check_fails "banyan --job of a job that is no one's: one line" 'no such job' banyan --job f3ZZZZZZZZZZ jobs
banyan cancel "$id"
banyan job wait "$id" >/dev/null
wait_for "cancel of the batch job: no process of it or of its jobs is left" 15 \
    sh -c "! pgrep -f 'sleep 317[0123]' && ! pgrep -f -- 'banyan-broker --neste[d]'"
check_output "... the job is canceled" '^CA$' banyan jobs -a --no-header -n1 -o '{st}'

# The enclosing time limit bounds the jobs inside: cut to end before it.
cat >"$T_DIR/limit.sh" <<'INNER'
#!/bin/sh
banyan run -t 1h sleep 100
echo "inner status $?"
INNER
start=$SECONDS
id=$(banyan batch -t 20s --output="$T_DIR/limit.out" "$T_DIR/limit.sh")
banyan job wait "$id" >/dev/null
check "the enclosing job ended by its limit (20 s), not the inner job's hour ($((SECONDS - start)) s)" \
    test $((SECONDS - start)) -lt 45
check_output "... the inner job got a timeout before it, and the script was told" \
    'timeout: the job reached its time limit' cat "$T_DIR/limit.out"
check_output "... its status reached the script" '^inner status [1-9]' cat "$T_DIR/limit.out"

# A nested broker that cannot start ends its job at once, saying why,
# instead of leaving the others waiting for it.
start=$SECONDS
check_fails "a nested broker that cannot start aborts the job with its reason" \
    'abort: .*banyan-broker: --nested: rundir cannot make /proc/nonesuch' \
    banyan run -N2 -n2 banyan-broker --nested --rundir=/proc/nonesuch -- true
check "... at once ($((SECONDS - start)) s)" test $((SECONDS - start)) -lt 15

# Bad scripts: one line naming the script and line; nothing submitted.
n=$(banyan jobs -a --no-header | wc -l)
printf '#!/bin/sh\n#BANYAN -N2 --job-name="unclosed\ntrue\n' >"$T_DIR/bad1.sh"
check_fails "a directive with an unclosed quote" '^banyan batch: .*/bad1.sh:2: #BANYAN -N2 --job-name="unclosed: a quote is not closed$' \
    banyan batch "$T_DIR/bad1.sh"
printf '#!/bin/sh\n#BANYAN --bogus\ntrue\n' >"$T_DIR/bad2.sh"
check_fails "a directive with an unknown option" '^banyan batch: .*/bad2.sh:2: #BANYAN --bogus: .*bogus' \
    banyan batch "$T_DIR/bad2.sh"
printf 'true\n' >"$T_DIR/bad3.sh"
check_fails "a script without #!" '^banyan batch: .*/bad3.sh:1: the first line must be #! and an interpreter' \
    banyan batch "$T_DIR/bad3.sh"
printf '#!/bin/sh\r\n#BANYAN -N1\r\ntrue\r\n' >"$T_DIR/dos.sh"
check_fails "a script with DOS line breaks" '^banyan batch: .*/dos.sh: has DOS line breaks' banyan batch "$T_DIR/dos.sh"
check_fails "a script that is not there" '^banyan batch: .*/nonesuch.sh' banyan batch "$T_DIR/nonesuch.sh"
check "... nothing submitted" test "$(banyan jobs -a --no-header | wc -l)" = "$n"
printf '#!/bin/sh\n#BANYAN -N1\n#BANYAN --job-name=from-script\necho nodes $BANYAN_JOB_NNODES\n' >"$T_DIR/conflict.sh"
id=$(banyan batch -N2 --output="$T_DIR/conflict.out" "$T_DIR/conflict.sh")
banyan job wait "$id" >/dev/null
check_output "the command line wins over a directive (-N2 over #BANYAN -N1); other directives stay" \
    '^2 from-script$' banyan jobs -a --no-header -n1 -o '{nnodes} {name}'
printf '#!/bin/sh\n  #BANYAN --env=A=1\n#BANYAN --env=B=2 -n1\necho "env $A $B ${C:-none}"\n' >"$T_DIR/env.sh"
id=$(banyan batch --output="$T_DIR/env.out" "$T_DIR/env.sh")
banyan job wait "$id" >/dev/null
check_output "every --env directive applies (an indented one too)" '^env 1 2 none' cat "$T_DIR/env.out"
id=$(banyan batch --env=C=3 --output="$T_DIR/env2.out" "$T_DIR/env.sh")
banyan job wait "$id" >/dev/null
check_output "... an --env on the command line replaces them all" '^env   3' cat "$T_DIR/env2.out"
printf '#!/bin/sh\n#BANYAN -o cpu-affinity=off\necho first version\n' >"$T_DIR/opts.sh"
id=$(banyan batch --urgency=0 -o exit-timeout=none --output="$T_DIR/opts.out" "$T_DIR/opts.sh")
check_output "a repeatable option on the command line replaces the directive's (-o)" '"exit-timeout": "none"' \
    banyan job info "$id"
check "... the directive's -o is gone" lacks '"cpu-affinity"' banyan job info "$id"
printf '#!/bin/sh\necho second version\n' >"$T_DIR/opts.sh"
banyan job urgency "$id" default
banyan job wait "$id" >/dev/null
check_output "the script is stored at submit: editing it afterwards changes nothing" '^first version$' cat "$T_DIR/opts.out"
SCRIPT
HWLOC_SYNTHETIC="core:4 pu:1" banyan start --test-size=4 bash "$T_DIR/nested.sh"
