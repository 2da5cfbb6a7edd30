#!/bin/bash
# Slurm compatibility (doc/spec/slurm.md, banyan-slurm(7)): a corpus of
# #SBATCH scripts (t/slurm/corpus), each checked for the jobspec it makes
# and run to its end, half through banyan batch and half through sbatch;
# every refused directive (t/slurm/refused) names its script, line and
# option, with nothing submitted; the front ends' formats field by field;
# srun inside an sbatch job runs in the job's own instance.
. "$(dirname "$0")/lib.sh"

# The site's mail program (job-manager.mail-program): sendmail's
# interface, each letter kept in mail/ with its arguments.
mkdir -p "$T_DIR/mail"
cat >"$T_DIR/sendmail" <<EOF
#!/bin/sh
f=\$(mktemp "$T_DIR/mail/letter.XXXXXX")
echo "args: \$*" >"\$f.tmp"
cat >>"\$f.tmp"
mv "\$f.tmp" "\$f.txt"
EOF
chmod +x "$T_DIR/sendmail"
start_cluster 2 $'[resource]\nsynthetic = "node[0-1]: core:4,gpu:2,memory:8G"\nproperties = { bigmem = "1" }
[queues.batch]\ndefault = true\n[queues.debug]\n[job-manager]\nmail-program = "'"$T_DIR/sendmail"'"'
CLEANUP+=("banyan shutdown")
wait_for "the instance runs" 20 banyan ready
export PATH="$BANYAN_BUILD_DIR/bin/slurm:$PATH"
corpus="$BANYAN_SOURCE_DIR/t/slurm"
cd "$T_DIR"
mkdir work
export FOO=one OTHER=other BIGMEM_NODE=node1
MPI_HELLO="$BANYAN_MPI_DIR/mpi-hello"
check "the MPI test program is built" test -x "$MPI_HELLO"
count_jobs() { banyan jobs -a -A --no-header | wc -l; }

# Refused directives: one line naming FILE:LINE and the option, from
# banyan batch and from sbatch alike, and nothing stored.
for f in "$corpus"/refused/*.sh; do
    name=$(basename "$f")
    cp "$f" "$name"
    error=$(sed -n 's/^#ERROR //p' "$f")
    check_fails "banyan batch refuses $name" "^banyan batch: $name:$error" banyan batch "$name"
    check_fails "sbatch refuses $name" "^sbatch: error: $name:$error" sbatch "$name"
done
check "nothing was submitted" test "$(count_jobs)" = 0
check_output "an error is one line" "^1$" sh -c "banyan batch 01-switches.sh 2>&1 | wc -l"
check_fails "an option sbatch does not know is refused on its command line" \
    "^sbatch: error: --switches=1: not supported \(banyan-slurm\(7\) lists what is\)" sbatch --switches=1 --wrap=true
check_fails "--export naming an unset variable is refused" "--export=NO_SUCH_VAR: NO_SUCH_VAR is not set" \
    sbatch --export=NO_SUCH_VAR --wrap=true
check_fails "a dependency type Slurm has and Banyan not is refused" "'aftercorr': not supported" \
    sbatch -d aftercorr:1 --wrap=true
check "still nothing was submitted" test "$(count_jobs)" = 0

# The corpus: each script submitted held (the command line wins over its
# directives), its stored jobspec checked, then released and run.
declare -A ids
n=0
for f in "$corpus"/corpus/*.sh; do
    name=$(basename "$f")
    cp "$f" "$name"
    if [ $((n++ % 2)) = 0 ]; then
        id=$(banyan batch --urgency=0 "$name" "$MPI_HELLO") &&
            id=$(banyan job info "$id" | python3 -c 'import json, sys; print(json.load(sys.stdin)["job"]["id"])')
    else
        id=$(sbatch --parsable --hold "$name" "$MPI_HELLO")
    fi
    check "$name is accepted" test -n "$id"
    ids[$name]=$id
    banyan job info "$id" >"$name.info"
    while read -r expect; do
        check "$name: ${expect}" python3 - "$name.info" "$expect" <<'PY'
import json, sys
spec = json.load(open(sys.argv[1]))["jobspec"]
path, _, want = sys.argv[2].partition("=")
at = spec
for key in path.split("/"):
    at = at[int(key)] if isinstance(at, list) else at[key]
if at != json.loads(want):
    sys.exit(f"{path} is {json.dumps(at)}")
PY
    done < <(sed -n 's/^#EXPECT //p' "$f")
done
check "the held corpus waits" test "$(squeue -h -t PD -o %i | wc -l)" = "${#ids[@]}"
check_output "squeue says why: held" "^JobHeldUser$" sh -c "squeue -h -t PD -o %r | sort -u"
for id in "${ids[@]}"; do scontrol release "$id"; done
all_ended() { [ -z "$(squeue -h -o %i)" ]; }
wait_for "every corpus job ends" 240 all_ended
for f in "$corpus"/corpus/*.sh; do
    name=$(basename "$f")
    ID=${ids[$name]}
    want=$(sed -n 's/^#RESULT //p' "$f")
    check_output "$name ends ${want:-COMPLETED 0:0}" "^${want:-COMPLETED 0:0}$" \
        sh -c "sacct -X -P -n -o State,ExitCode -j $ID | tr '|' ' '"
    while read -r test_line; do
        check "$name: $test_line" env ID="$ID" sh -c "$test_line"
    done < <(sed -n 's/^#CHECK //p' "$f")
done

# sbatch: Slurm's answer, --parsable, --wrap, a script on stdin, and
# slurm-N.out by default.
check_output "sbatch says 'Submitted batch job N'" "^Submitted batch job [0-9]+$" sbatch --wrap='echo wrapped'
# Mail (jobs.md §10): a letter per event asked for, with Slurm's subject,
# through the site's program; none where mail is off, which submit says.
mailed=$(sbatch --parsable -J mailed --mail-type=BEGIN,END --mail-user=alice@example.org --wrap=true)
failed=$(sbatch --parsable -J failing --mail-type=FAIL --wrap='exit 3')
quiet=$(sbatch --parsable -J quiet --mail-type=FAIL --wrap=true)
never=$(sbatch --parsable -J never -d "afterok:$failed" --mail-type=INVALID_DEPEND --wrap=true)
array=$(sbatch --parsable -J arr --array=1-2 --mail-type=END --wrap=true)
letters() { cat "$T_DIR"/mail/*.txt 2>/dev/null; }
all_mailed() {
    letters | grep -q "Job_id=$mailed Name=mailed Ended" && letters | grep -q "Job_id=$failed Name=failing Failed" &&
        letters | grep -q "Job_id=$never Name=never Dependency" && letters | grep -q "Job_id=$array Name=arr Ended"
}
wait_for "the letters" 30 all_mailed
check_output "the start mailed, to the address given" "^Subject: Banyan Job_id=$mailed Name=mailed Began, Queued time 00:00:0[0-9]$" letters
check_output "and the end" "^Subject: Banyan Job_id=$mailed Name=mailed Ended, Run time 00:00:0[0-9], COMPLETED, ExitCode 0$" letters
check_output "as sendmail is called" "^args: -oi -- alice@example.org$" letters
check_output "a failure mailed to the job's user" \
    "^Subject: Banyan Job_id=$failed Name=failing Failed, Run time 00:00:0[0-9], FAILED, ExitCode 3$" letters
check_output "to the user's name" "^To: $(id -un)$" letters
check_output "a dependency that can never be met" "^Subject: Banyan Job_id=$never Name=never Dependency never satisfied$" letters
check_output "an array mails as one job" "^Subject: Banyan Job_id=$array Name=arr Ended, Run time" letters
check "and its elements not" test -z "$(letters | grep "Name=arr" | grep -v "Job_id=$array ")"
wait_for "the job that asked only for failures ends" 30 sh -c "sacct -P -n -o State -j $quiet | grep -qx COMPLETED"
check "it mailed nothing" test -z "$(letters | grep "Job_id=$quiet ")"
check_fails "a mail type Banyan cannot send is refused" "'TIME_LIMIT_90': not supported" \
    sbatch --mail-type=TIME_LIMIT_90 --wrap=true
check_output "where mail is off, submit says so once, and the job runs" \
    "^warning: mail is off on this cluster: /no/sendmail is not there$" \
    banyan start --test-size=1 -S job-manager.mail-program=/no/sendmail sbatch --wait --mail-type=END --wrap=true
wrapped=$(sbatch --parsable --wrap='echo wrapped $SLURM_JOB_NAME')
check "--parsable prints the id alone, in decimal" grep -Eqx '[0-9]+' <<<"$wrapped"
from_stdin=$(printf '#!/bin/sh\n#SBATCH -J from-stdin\necho read from stdin\n' | sbatch --parsable)
check "sbatch reads the script from stdin" test -n "$from_stdin"
check "sbatch --wait waits and gives the job's exit code" sh -c "sbatch --wait --wrap='exit 4' >/dev/null; test \$? = 4"
wait_for "the wrapped job ends" 30 sh -c "sacct -P -n -o State -j $wrapped | grep -qx COMPLETED"
check_output "--wrap's default output is slurm-N.out, named wrap" "^wrapped wrap$" cat "slurm-$wrapped.out"
wait_for "the stdin job ends" 30 sh -c "sacct -P -n -o State -j $from_stdin | grep -qx COMPLETED"
check_output "the script from stdin ran with its directives" "^read from stdin$" cat "slurm-$from_stdin.out"

# -d singleton: after every earlier job of the same user and name ends;
# a job of another name does not wait.
first=$(sbatch --parsable -J solo --wrap='until [ -e solo.go ]; do sleep 0.1; done')
wait_for "the first solo job runs" 30 sh -c "squeue -h -j $first -o %T | grep -qx RUNNING"
second=$(sbatch --parsable -J solo -d singleton --wrap='echo second solo')
other=$(sbatch --parsable -J not-solo -d singleton --wrap=true)
wait_for "a singleton of another name runs at once" 30 sh -c "sacct -P -n -o State -j $other | grep -qx COMPLETED"
check_output "a singleton waits for its name's running job" "^PENDING Dependency singleton\\(unfulfilled\\)$" \
    squeue -h -j "$second" -o "%T %r %E"
touch solo.go
wait_for "the singleton runs once the first has ended" 30 sh -c "sacct -P -n -o State -j $second | grep -qx COMPLETED"
check "it started once the first had ended" \
    test ! "$(sacct -P -n -o Start -j "$second")" \< "$(sacct -P -n -o End -j "$first")"

# A batch job's instance passes USR1 on: without B:, to its running steps
# alone (the script goes on); with B: (--signal-to=script), to the script.
steps=$(sbatch --parsable -t 30 --signal=USR1@300 \
    --wrap='srun sh -c "trap \"echo step got USR1; exit 0\" USR1; touch step.ready; while :; do sleep 0.1; done"
echo script went on')
wait_for "the step runs" 30 test -e step.ready
check "scancel -s USR1 signals the batch job" scancel -s USR1 "$steps"
wait_for "the job with the signaled step ends" 30 sh -c "sacct -P -n -o State -j $steps | grep -qx COMPLETED"
check_output "its step got the signal" "^step got USR1$" grep step "slurm-$steps.out"
check_output "and its script went on, untouched" "^script went on$" tail -1 "slurm-$steps.out"
printf '#!/bin/sh\ntrap "echo script got USR1; exit 0" USR1\ntouch script.ready\nwhile :; do sleep 0.1; done\n' >trap.sh
scripted=$(banyan batch --signal-to=script --output=script.out trap.sh)
wait_for "the script runs" 30 test -e script.ready
check "banyan job kill -s USR1 signals the batch job" banyan job kill -s USR1 "$scripted"
check "the signaled script ends, with status 0" banyan job wait "$scripted"
check_output "its trap ran" "^script got USR1$" cat script.out
cat >all.sh <<'EOF'
#!/bin/sh
trap 'echo script got USR1' USR1
banyan run sh -c 'trap "echo job got USR1; exit 0" USR1; touch all.ready; sleep 60 & wait'
echo script went on
EOF
both=$(banyan batch --output=all.out all.sh)
wait_for "the job in the batch job runs" 30 test -e all.ready
check "banyan job kill -s USR1 signals it" banyan job kill -s USR1 "$both"
check "the batch job ends, with status 0" banyan job wait "$both"
check_output "by default its job got the signal, and then its script" \
    "^job got USR1 script got USR1 script went on $" sh -c "tr '\\n' ' ' <all.out"
check_fails "a batch job takes no other signal in --signal" "an instance \(batch, alloc\) passes on only USR1 and USR2" \
    banyan batch -t 5 --signal=HUP@60 trap.sh

# srun inside an sbatch job runs in the job's own instance (its
# allocation): its step is a job there, not in the instance outside.
before=$(count_jobs)
inner=$(sbatch --parsable -n2 --wrap='srun sh -c "echo step \$SLURM_PROCID of \$SLURM_NTASKS in \${BANYAN_URI##*/}"; banyan jobs -a --no-header | wc -l')
wait_for "the job with a step ends" 30 sh -c "sacct -P -n -o State -j $inner | grep -qx COMPLETED"
check_output "srun in the job runs the job's task count" "^step 1 of 2 in local.sock$" cat "slurm-$inner.out"
check_output "the step was a job of the job's instance" "^1$" tail -1 "slurm-$inner.out"
check "the step was no job of the instance outside" test "$(count_jobs)" = $((before + 1))
check_output "srun outside a job runs one task" "^1 0$" srun sh -c 'echo $SLURM_NTASKS $SLURM_PROCID'
check_output "srun -n2 -l labels each task" "^1: 1$" srun -n2 -l sh -c 'echo $SLURM_PROCID'
check_output "srun exits with the job's code" "^7$" sh -c 'srun sh -c "exit 7"; echo $?'

# squeue: Slurm's formats, field by field, and its default layout.
held=$(sbatch --parsable --hold -J held-one -t 1-02:00:00 -p debug --wrap=true)
check_output "squeue's default header is Slurm's" \
    "^ +JOBID PARTITION +NAME +USER ST +TIME +NODES NODELIST\(REASON\)$" squeue
check_output "squeue -h -o: id, name, user, state, times, nodes, reason, partition" \
    "^$held\|held-one\|$(id -un)\|PD\|PENDING\|0:00\|1-02:00:00\|1\|\(JobHeldUser\)\|debug\|JobHeldUser$" \
    squeue -h -j "$held" -o '%i|%j|%u|%t|%T|%M|%l|%D|%R|%P|%r'
check_output "squeue cuts a name to its width, never an id" "^$held held-on$" squeue -h -j "$held" -o '%.5i %.7j'
check_output "squeue --json lists the job with Slurm's keys" "\"job_state\": \"PENDING\"" squeue --json -j "$held"
check "squeue -t R lists no held job" test -z "$(squeue -h -t R -o %i)"
check_fails "squeue refuses a field it does not have" "%Z is not supported" squeue -o %Z
check_fails "squeue refuses an unknown state" "Invalid job state specified: BOGUS" squeue -t bogus

# scontrol: Key=Value lines; hold, release, update.
check_output "scontrol show job: JobId and JobName" "^JobId=$held JobName=held-one$" scontrol show job "$held"
check_output "scontrol show job: JobState and Reason" "^   JobState=PENDING Reason=JobHeldUser Dependency=\(null\)$" \
    scontrol show job "$held"
after_held=$(sbatch --parsable -d "afterok:$held" --wrap=true)
check_output "a dependency shows in Slurm's form, ids in decimal" "^Dependency afterok:$held\\(unfulfilled\\)$" \
    squeue -h -j "$after_held" -o "%r %E"
check "scancel cancels the dependent job" scancel "$after_held"
check_output "scontrol show job: TimeLimit" "RunTime=00:00:00 TimeLimit=1-02:00:00" scontrol show job "$held"
check_output "scontrol show job: WorkDir" "^   WorkDir=$T_DIR$" scontrol show job "$held"
check_output "scontrol show job: StdOut is slurm-N.out" "^   StdOut=$T_DIR/slurm-$held.out$" scontrol show job "$held"
check "scontrol update TimeLimit" scontrol update JobId="$held" TimeLimit=30
check_output "the new limit shows" "TimeLimit=00:30:00" scontrol show job "$held"
check_fails "scontrol update refuses what it cannot change" "NumNodes: not supported" \
    scontrol update JobId="$held" NumNodes=3
check_fails "scontrol show job of no such job" "Invalid job id specified" scontrol show job 123
check_output "scontrol show hostnames expands a list" "^node0 node1 node2$" \
    sh -c "scontrol show hostnames 'node[0-2]' | paste -sd' '"
check_output "scontrol show partition: the queues" "^PartitionName=debug$" scontrol show partition
check_output "scontrol show node: a node's state" "^   State=(IDLE|MIXED|ALLOCATED)" scontrol show node node0

# scancel: by id; an ended job is said so and is no error.
check "scancel cancels the held job" scancel "$held"
check_output "sacct: CANCELLED" "^$held\|CANCELLED$" sacct -P -n -o JobIDRaw,State -j "$held"
check_output "scancel of an ended job says so, and exits 0" "already completing or completed" scancel "$held"
check_fails "scancel of nothing" "No job identification provided" scancel

# sacct: fields and -p/-P; the default header and its dashes.
check_output "sacct -P: fields as Slurm's" \
    "^$wrapped\|$wrapped\|wrap\|COMPLETED\|0:0\|00:00:0[0-9]\|1\|UNLIMITED$" \
    sacct -P -n -j "$wrapped" --format=JobID,JobIDRaw,JobName,State,ExitCode,Elapsed,NNodes,Timelimit
check_output "sacct -p ends each line with |" "^$wrapped\|COMPLETED\|$" sacct -p -n -j "$wrapped" -o JobIDRaw,State
check_output "sacct's default header" "^JobID +JobName +Partition +Account +AllocCPUS +State +ExitCode $" sacct
check_output "sacct's dashes under it" "^-{20} -{10} -{10}" sacct
check_output "sacct: a job's exit code" "^FAILED\|4:0$" sacct -S 2020-01-01 -P -n -o State,ExitCode -s F
check_fails "sacct refuses a field it does not know" "Invalid field requested: \"Bogus\"" sacct -o Bogus
check_output "an element of an array is A_I" "^${ids[04-array.sh]}_3\|COMPLETED$" \
    sh -c "sacct -P -n -o JobID,State -j ${ids[04-array.sh]} | grep _3"

# sinfo and sacctmgr.
check_output "sinfo: the default layout" "^PARTITION +AVAIL +TIMELIMIT +NODES +STATE +NODELIST$" sinfo
check_output "sinfo -o %P marks the default queue" "^batch\*$" sinfo -h -o %P
check_output "sinfo: nodes by state" "^debug +up +UNLIMITED +2 +idle +node\[0-1\]$" sinfo -p debug
check "sacctmgr shows no account for a cluster without banks" test -z "$(sacctmgr -n show user "$(id -un)" format=account%20)"
check_fails "sacctmgr changes nothing" "only 'show' and 'list'" sacctmgr add account x
