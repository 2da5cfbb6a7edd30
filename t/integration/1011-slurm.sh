#!/bin/bash
# Slurm compatibility (doc/spec/slurm.md, banyan-slurm(7)): a corpus of
# #SBATCH scripts (t/slurm/corpus), each checked for the jobspec it makes
# and run to its end, half through banyan batch and half through sbatch;
# every refused directive (t/slurm/refused) names its script, line and
# option, with nothing submitted; the front ends' formats field by field;
# srun inside an sbatch job runs in the job's own instance.
. "$(dirname "$0")/lib.sh"

start_cluster 2 $'[resource]\nsynthetic = "node[0-1]: core:4,gpu:2,memory:8G"\nproperties = { bigmem = "1" }
[queues.batch]\ndefault = true\n[queues.debug]'
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
