#!/bin/bash
# banyan-sched-query as a user of Fluxion's resource-query drives it: the
# simple format line by line, reservations, cancel, info, find, the other
# formats, and one clear line for each kind of bad input.
. "$(dirname "$0")/lib.sh"

src=${BANYAN_SOURCE_DIR:-$(dirname "$0")/../..}
conf=$src/../shared/conformance/fluxion
[ -d "$conf" ] || conf=$src/shared/conformance/fluxion
js=$conf/jobspecs/basics
q() { banyan-sched-query -L "$conf/grugs/tiny.graphml" -S CA -d "$@"; }
# The vertex lines printed for job $1 in file $2.
job_lines() { awk -v id="INFO: JOBID=$1" '/^      /{if(r){b="";r=0} b=b $0 "\n"; next} $0==id{printf "%s", b} {r=1}' "$2"; }

# Four 1-core slots with high ids first, then one that cannot fit: the
# expected file was checked by hand against tiny.graphml (2 nodes, 2
# sockets of 18 cores each; a slot holds its socket).
printf 'match allocate %s\n' "$js/test001.yaml" "$js/test001.yaml" "$js/test001.yaml" "$js/test001.yaml" \
    "$js/test001.yaml" >"$T_DIR/cmds"
echo quit >>"$T_DIR/cmds"
check "high: four sockets, then no match" q -P high -t "$T_DIR/high.out" <"$T_DIR/cmds"
check "the -t file is the expected allocation" diff -u "$src/t/data/sched/tiny-high.out" "$T_DIR/high.out"

# Reservations: 18-core sockets, ten times; four now, four at 3600, two at 7200.
for i in $(seq 10); do echo "match allocate_orelse_reserve $js/test006.yaml"; done >"$T_DIR/resv"
q -P high <"$T_DIR/resv" >"$T_DIR/resv.out"
check "four now, four at 3600, two at 7200" test \
    "$(grep -c 'AT=Now' "$T_DIR/resv.out") $(grep -c 'AT=3600' "$T_DIR/resv.out") $(grep -c 'AT=7200' "$T_DIR/resv.out")" \
    = "4 4 2"

# Cancel, info, and a job id that advances on failures too.
cat >"$T_DIR/cancel" <<CMDS
match allocate $js/test006.yaml
match allocate $js/test006.yaml
match allocate $js/test006.yaml
match allocate $js/test006.yaml
match allocate $js/test006.yaml
cancel 2
info 1
match allocate $js/test006.yaml
CMDS
q <"$T_DIR/cancel" >"$T_DIR/cancel.out" 2>&1
job_lines 6 "$T_DIR/cancel.out" | tr -d '\n' >"$T_DIR/job6"
check_output "job 6 got the socket job 2 gave back" "core35.*socket1\[1:x\].*node0\[1:s\]" cat "$T_DIR/job6"
check "job 5 found nothing" grep -B1 -q "JOBID=5" <(grep -A1 "No matching" "$T_DIR/cancel.out")
check_output "info names the job, its state and start" "^INFO: 1, ALLOCATED, 0, " cat "$T_DIR/cancel.out"

# Formats.
echo "match allocate $js/test001.yaml" >"$T_DIR/one"
check_output "pretty_simple starts at the root" "^      ---tiny0\[1:shared\]" \
    bash -c "banyan-sched-query -L '$conf/grugs/tiny.graphml' -d -F pretty_simple <'$T_DIR/one' | head -1"
# Fluxion's pretty writer puts each vertex in front as the walk leaves it:
# the simple (postorder) lines reversed, the last child first.
banyan-sched-query -L "$conf/grugs/tiny.graphml" -d -P low <"$T_DIR/one" | grep '^      ' >"$T_DIR/simple.lines"
banyan-sched-query -L "$conf/grugs/tiny.graphml" -d -P low -F pretty_simple <"$T_DIR/one" | grep '^      ' |
    sed 's/:shared]/:s]/; s/:exclusive]/:x]/' >"$T_DIR/pretty.lines"
check "pretty_simple is the simple lines in reverse order" diff <(tac "$T_DIR/simple.lines") "$T_DIR/pretty.lines"
check_output "rv1 is R with the node and the core" \
    '"R_lite":\[\{"children":\{"core":"0"\},"rank":"0"\}\]' \
    bash -c "banyan-sched-query -L '$conf/grugs/tiny.graphml' -P low -d -F rv1_nosched <'$T_DIR/one' | head -1"
check_output "jgf has the vertices' paths" '"containment":"/tiny0/rack0/node0/socket0/core0"' \
    bash -c "banyan-sched-query -L '$conf/grugs/tiny.graphml' -P low -d -F jgf <'$T_DIR/one' | head -1"
check_output "-e prints the time and the visits" "^INFO: VISITS=[0-9]+" q -e <"$T_DIR/one"
check "with -t the matches go to the file, not to stdout" \
    sh -c "[ -z \"\$(banyan-sched-query -L '$conf/grugs/tiny.graphml' -d -t '$T_DIR/only.out' <'$T_DIR/one')\" ] &&
           grep -q JOBID=1 '$T_DIR/only.out'"
check_output "-p given blank keeps the default, as resource-query's" "JOBID=1" \
    banyan-sched-query -L "$conf/grugs/tiny.graphml" -d -p "" <"$T_DIR/one"
check_output "... and each -p adds filters" "JOBID=1" \
    banyan-sched-query -L "$conf/grugs/tiny.graphml" -d -p ALL:core -p ALL:node <"$T_DIR/one"

# A slot takes pool vertices whole (Fluxion's granules): four slots of a
# core and 1 of memory take four whole memory vertices of a socket, so
# tiny's four sockets hold four such jobs and the fifth finds nothing.
for i in 1 2 3 4 5; do echo "match allocate $conf/jobspecs/granule/test001.yaml"; done >"$T_DIR/granule"
q -P high <"$T_DIR/granule" >"$T_DIR/granule.out"
check_output "a slot's memory vertex is taken whole" "^ +-+memory4\[2:x\]$" head -20 "$T_DIR/granule.out"
check_output "... four jobs, and the fifth finds nothing" "^4 1$" \
    sh -c "echo \$(grep -c 'RESOURCES=ALLOCATED' '$T_DIR/granule.out') \$(grep -c 'No matching' '$T_DIR/granule.out')"
# A plain allocate says only that nothing was found; Fluxion asks whether
# it could ever be met with allocate_with_satisfiability alone.
q <<<"match allocate $conf/jobspecs/satisfiability/test009.yaml" >"$T_DIR/plain.out" 2>/dev/null
check "a plain allocate of an unknown type says no match, not unsatisfiable" \
    sh -c "grep -q 'No matching' '$T_DIR/plain.out' && ! grep -q Unsatisfiable '$T_DIR/plain.out'"
# multi-match: two jobspecs or more; it stops at the first not matched.
check_output "multi-match of one jobspec is malformed" "^ERROR: malformed command$" \
    q <<<"multi-match allocate $js/test001.yaml"
q <<<"multi-match allocate $conf/jobspecs/satisfiability/test009.yaml $js/test001.yaml" >"$T_DIR/multi.out" 2>/dev/null
check_output "multi-match stops at the first jobspec not matched" "^1 1$" \
    sh -c "echo \$(grep -c 'JOBID=' '$T_DIR/multi.out') \$(grep -c 'No matching' '$T_DIR/multi.out')"
check_output "find lists what is allocated" "core0\[1:x\]" \
    bash -c "(cat '$T_DIR/one'; echo 'find sched-now=allocated') | banyan-sched-query -L '$conf/grugs/tiny.graphml' -P low -d"

# Other graph formats load.
cat >"$T_DIR/node.yaml" <<YAML
version: 1
resources: [{type: node, count: 1, with: [{type: slot, count: 1, label: task, with: [{type: core, count: 2}]}]}]
tasks: [{command: [app], slot: task, count: {per_slot: 1}}]
attributes: {system: {duration: 60}}
YAML
check_output "a JGF loads" "JOBID=1" banyan-sched-query -L "$conf/jgfs/tiny.json" -f jgf -d <"$T_DIR/one"
check_output "a synthetic cluster loads" "node0\[1:s\]" \
    banyan-sched-query -L "node:4,socket:2,core:4" -f synthetic -P low -d <<<"match allocate $T_DIR/node.yaml"
# The default policy is Fluxion's first: most cores free, the later node on
# a tie, so two jobs go to the last two nodes.
check_output "first spreads jobs from the highest node" "node3\[1:s\].*node2\[1:s\]" \
    bash -c "banyan-sched-query -L 'node:4,socket:2,core:4' -f synthetic -d <<<'match allocate $T_DIR/node.yaml
match allocate $T_DIR/node.yaml' | grep -o 'node[0-9]\[1:s\]' | paste -s -d' '"

# pack (the instance's default) lets a task's cores span a node's sockets;
# Fluxion's policies keep a slot of cores within one socket.
cat >"$T_DIR/six.yaml" <<YAML
version: 1
resources: [{type: node, count: 1, with: [{type: slot, count: 1, label: task, with: [{type: core, count: 6}]}]}]
tasks: [{command: [app], slot: task, count: {per_slot: 1}}]
attributes: {system: {duration: 60}}
YAML
check_output "pack: six cores over two 4-core sockets" "JOBID=1" \
    banyan-sched-query -L "node:1,socket:2,core:4" -f synthetic -P pack -d <<<"match allocate $T_DIR/six.yaml"
check_output "lonode: no socket holds six" "No matching resources found" \
    banyan-sched-query -L "node:1,socket:2,core:4" -f synthetic -P lonode -d <<<"match allocate $T_DIR/six.yaml"

# Bad input: one line each, never a crash.
check_fails "an unknown policy is named" "unknown match policy 'fastest'" q -P fastest </dev/null
check_fails "a malformed pruning filter is named" "--prune-filters: 'core' is not HIGH-TYPE:LOW-TYPE" \
    q -p ALL:node,core </dev/null
# Errors go to stderr only: the -t file holds matches, as Fluxion's does.
printf 'cancel 7\nbogus\nmatch allocate %s\n' "$js/test001.yaml" | q -t "$T_DIR/errs.out" >/dev/null 2>"$T_DIR/errs.err"
check "errors are not in the -t file" test "$(grep -c ERROR "$T_DIR/errs.out")" = 0
check_output "errors are on stderr, one line each, as resource-query's" "^ERROR: nonexistent job 7$" cat "$T_DIR/errs.err"
check_fails "a missing graph file is named" "-L /nonexistent: .*cannot read" \
    banyan-sched-query -L /nonexistent -d </dev/null
check_fails "a graph that is not GraphML is refused" "-L .*" banyan-sched-query -L "$T_DIR/cmds" -d </dev/null
check_output "a missing jobspec is named" "^ERROR: can't open .*nosuch.yaml" \
    q <<<"match allocate $T_DIR/nosuch.yaml"
check_output "an unknown match op is named" "^ERROR: unknown subcmd grab$" q <<<"match grab $js/test001.yaml"
echo "version: 9999" >"$T_DIR/bad.yaml"
check_output "an invalid jobspec gives its reason" "^match_allocate: ERROR: Jobspec error for 1: .*resources" \
    q <<<"match allocate $T_DIR/bad.yaml"
check_output "a bad command says what the commands are" "ERROR: bad command 'frobnicate'" q <<<"frobnicate"
check_output "cancel of an unknown job" "^ERROR: nonexistent job 9$" q <<<"cancel 9"
check_output "info of an unknown job, on stdout" "^ERROR: jobid doesn't exist: 9$" q <<<"info 9"
# Fluxion's set of types is closed once the graph is loaded: a type that is
# neither the graph's nor one it always knows is a jobspec error, and the
# job id is not used up.
q <<<"match allocate_with_satisfiability $conf/jobspecs/satisfiability/test009.yaml
match allocate $js/test001.yaml" >"$T_DIR/zone.out" 2>"$T_DIR/zone.err"
check_output "a type the graph lacks (zone) is a jobspec error, as Fluxion's" \
    '^match_allocate: ERROR: Jobspec error for 1: Value of "type" must be a resource type known to fluxion$' \
    cat "$T_DIR/zone.err"
check_output "... the job found nothing, and the next job is job 1" "^JOBID=1 JOBID=1 $" \
    sh -c "grep -o 'JOBID=[0-9]*' '$T_DIR/zone.out' | tr '\n' ' '"

# Every Fluxion test jobspec, on every conformance GRUG: each gets one
# answer (a match, or no match, after an error line for a jobspec refused)
# and the tool never dies.
find "$conf/jobspecs" -name '*.yaml' | sort | sed 's/^/match allocate_with_satisfiability /' >"$T_DIR/all"
n=$(wc -l <"$T_DIR/all")
for g in "$conf"/grugs/*.graphml; do
    banyan-sched-query -L "$g" -d <"$T_DIR/all" >"$T_DIR/all.out" 2>&1
    rc=$?
    answers=$(grep -c -E '^INFO: JOBID=' "$T_DIR/all.out")
    check "$(basename "$g"): all $n Fluxion jobspecs answered (rc $rc, $answers answers)" \
        test "$rc" = 0 -a "$answers" = "$n"
done
