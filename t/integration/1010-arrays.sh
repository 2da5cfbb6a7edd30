#!/bin/bash
# Job arrays (doc/spec/arrays.md): bad --array specs refused in one line
# with nothing stored; an array of 100 with %5 never has more than 5
# elements running, each sees its index and writes its own file; the
# array lists as one line while indexes remain, its elements as ID[I];
# cancel of one element, of one not yet made, and of the whole array;
# dependencies on an array and on one element; throttle changed with
# `banyan job update`; an array goes on where it was after rank 0 is
# killed and started again.
. "$(dirname "$0")/lib.sh"

start_cluster 2 $'[resource]\nsynthetic = "node[0-1]: core:8"'
CLEANUP+=("banyan shutdown")
wait_for "the instance runs" 20 banyan ready
cd "$T_DIR"
sim() { echo "-S exec.test.run_duration=$1"; }
line_of() { banyan jobs -a --no-header -o '{id} {st} {info}' | grep -F "$1" | head -1; }
export -f line_of
result_of() { banyan jobs -a --no-header -o '{id} {st}' | awk -v id="$1" '$1 == id {print $2}'; }

# Bad specs: one line each, nothing stored.
check_fails "a reversed range is refused" "'9-1': the range '9-1' is reversed" banyan submit --array 9-1 true
check_fails "an empty element is refused" "'1,,3': an empty element" banyan submit --array 1,,3 true
check_fails "a step without a range is refused" "a step needs a range" banyan submit --array 5:2 true
check_fails "a throttle of 0 is refused" "a throttle of 0 would run nothing" banyan submit --array 1-3%0 true
check_fails "more indexes than max-array-size are refused, naming the limit" \
    "more than 100000 indexes \(job-manager.max-array-size\)" banyan submit --array 0-199999 true
check_fails "an index over max-array-index is refused" "index 10000000 is over the largest allowed" \
    banyan submit --array 10000000 true
check_fails "--array with --cc is refused" "--array and --cc: give one" banyan submit --array 1-3 --cc 1-2 true
check "nothing was stored" sh -c '[ -z "$(banyan jobs -a --no-header)" ]'

# An array of 100, at most 5 at once: each element notes how many run
# beside it, under a lock, and writes its index to its own file.
cat >element.sh <<'SCRIPT'
#!/bin/sh
( flock 9; n=$(ls running | wc -l); echo $((n + 1)) >>together; touch "running/$1" ) 9>lock
echo "$BANYAN_ARRAY_INDEX of $BANYAN_ARRAY_COUNT in $BANYAN_ARRAY_JOB_ID; slurm $SLURM_ARRAY_TASK_ID $SLURM_ARRAY_TASK_COUNT"
sleep 0.2
( flock 9; rm "running/$1" ) 9>lock
SCRIPT
chmod +x element.sh
mkdir running
array=$(banyan submit --urgency=0 --array '1-100%5' --output 'out.{{array_id}}.{{array_index}}' \
    ./element.sh '{{array_index}}')
check_output "held, the array is one line: its indexes to make and the throttle" \
    "^ *$array\[1-100%5\] S held \(urgency 0\)$" line_of "$array"
banyan job release "$array"
check "released, the whole array ends" timeout 120 banyan job wait "$array"
check_output "... completed" "^CD$" result_of "$array"
check_output "never more than 5 elements ran at once" "^[1-5]$" sh -c 'sort -n together | tail -1'
check_output "... and more than one did" "^[2-5]$" sh -c 'sort -n together | tail -1'
check_output "every element ran once" "^100$" sh -c 'wc -l <together'
check_output "each wrote its own file, named by {{array_id}} and {{array_index}}" "^100$" \
    sh -c "ls out.$array.* | wc -l"
check_output "... and saw its index, the count and the array's id, Slurm's names too" \
    "^37 of 100 in $array; slurm 37 100$" cat "out.$array.37"
check_output "an element is named ID[INDEX] in listings" "^ *$array\[37\] CD$" \
    sh -c "banyan jobs -a --no-header -o '{id} {st}' | grep -F '$array[37]'"
check_output "banyan job info takes ID[INDEX]" "\"name\": \"element.sh\"" banyan job info "$array[37]"

# Cancel: one running element, one not yet made, then the whole array.
long=$(banyan submit --array '1-10%2' $(sim 3600) true)
wait_for "element 1 is made" 20 banyan job info "$long[1]"
check "... and starts" banyan job wait-event -t 20s "$long[1]" start
check "element 1 is canceled alone" banyan cancel "$long[1]"
wait_for "... and element 3 is made in its place" 20 banyan job info "$long[3]"
check "... and starts" banyan job wait-event -t 20s "$long[3]" start
check "element 7, not yet made, is canceled" banyan cancel "$long[7]"
check_output "the array lists without it" "^ *$long\[4-6,8-10%2\] S throttled \(2 active\)$" line_of "$long"
check_fails "an index the array does not have is named" "$long\[11\]: no such index in that array" \
    banyan cancel "$long[11]"
check_fails "an element not yet made cannot be held" "$long\[9\]: not made yet" banyan job hold "$long[9]"
check "the whole array is canceled" banyan cancel "$long"
check "... it ends" banyan job wait-event -t 20s "$long" clean
check_output "... canceled" "^CA$" result_of "$long"
check_output "... with its running elements" "^CA$" result_of "$long[2]"
check_output "no element after 3 was made" "^3$" \
    sh -c "banyan jobs -a --no-header -o '{id}' | grep -cF '$long['"

# Canceled while its elements wait: each ends once, the array once; and
# `banyan cancel --all` cancels an array with its elements, in one go.
wide=$(banyan submit --array 1-4 -N2 -x $(sim 3600) true)
wait_for "its first element runs, and three wait" 20 \
    sh -c "[ \"\$(banyan jobs --no-header -o '{id} {st}' | grep -cF '$wide[')\" -eq 4 ]"
check "an element is renamed by ID[INDEX]" banyan job update "$wide[3]" name=third
check_output "... and lists so" "^third$" sh -c "banyan jobs --no-header -o '{id} {name}' | grep -F '$wide[3]' | awk '{print \$2}'"
check "banyan cancel --all cancels the array and its elements, and succeeds" banyan cancel --all
check "... the array ends" banyan job wait-event -t 20s "$wide" clean
check_output "... once" "^1$" sh -c "banyan job eventlog $wide | grep -c ' clean'"
check_output "... as every element does" "^4$" \
    sh -c "banyan jobs -a --no-header -o '{id} {st}' | grep -F '$wide[' | grep -c ' CA$'"

# A batch script with #BANYAN --array: each element a nested instance.
cat >array.sh <<'SCRIPT'
#!/bin/sh
#BANYAN --array=1-3
#BANYAN --output=batch.{{array_index}}.out
echo "batch element $BANYAN_ARRAY_INDEX"
SCRIPT
batch=$(banyan batch -N1 array.sh)
check "a batch array ends" timeout 60 banyan job wait "$batch"
check_output "... each element's script saw its index and wrote its own file" \
    "^batch element 1 batch element 2 batch element 3 $" sh -c 'cat batch.1.out batch.2.out batch.3.out | tr "\n" " "'

# Dependencies: on a whole array, on one element; and on an array with
# an element that fails.
ok=$(banyan submit --array 1-3 true)
after_all=$(banyan submit --dependency "afterok:$ok" true)
after_two=$(banyan submit --dependency "afterok:$ok[2]" true)
check "a job after the whole array runs" timeout 30 banyan job wait "$after_all"
check "a job after its element 2 runs" timeout 30 banyan job wait "$after_two"
bad=$(banyan submit --array 1-3 sh -c 'test $BANYAN_ARRAY_INDEX != 2')
never=$(banyan submit --dependency "afterok:$bad" true)
check "an array with a failed element ends" timeout 30 banyan job wait-event -t 30s "$bad" array-end
check_output "... failed, naming the element" "^F$" result_of "$bad"
check_output "... its end names the first element that failed" "$bad\[2\] failed \(exit 1\)" \
    sh -c "banyan job eventlog $bad | grep array-end"
check_output "a job after it can never run" "dependency: afterok:$bad can never be met" \
    sh -c "banyan job wait $never 2>&1"
check_fails "a dependency on an index the array lacks is refused" "afterok:$ok\[9\]: no such index in that array" \
    banyan submit --dependency "afterok:$ok[9]" true

# The throttle changed while it runs; then rank 0 killed and started
# again: the array goes on where it was.
slow=$(banyan submit --requires=rank:1 --array '1-6%1' $(sim 3600) true)
wait_for "element 1 is made" 20 banyan job info "$slow[1]"
check "... and starts" banyan job wait-event -t 20s "$slow[1]" start
check "the throttle is raised to 2" banyan job update "$slow" throttle=2
wait_for "... element 2 is made" 20 banyan job info "$slow[2]"
check "... and starts beside it" banyan job wait-event -t 20s "$slow[2]" start
held=$(banyan submit --urgency=0 true)
check_fails "a throttle is only an array's" "throttle: not a job array" banyan job update "$held" throttle=2
banyan cancel "$held"
kill -9 "$(broker_pid "$T_DIR" 0)"
wait_for "rank 0 is gone" 10 sh -c "! banyan ping -c1 broker >/dev/null 2>&1"
start_broker "$T_DIR/c.toml" 0
wait_for "rank 0 is back, with its followers" 30 all_up 2
check_output "after the restart the array still has indexes 3-6 to make" "^ *$slow\[3-6%2\] S throttled \(2 active\)$" \
    line_of "$slow"
check "element 1 is canceled" banyan cancel "$slow[1]"
wait_for "... and element 3 is made" 20 banyan job info "$slow[3]"
check "... and starts" banyan job wait-event -t 20s "$slow[3]" start
check_output "... element 4 is not made: two are active" "^ *$slow\[4-6%2\] S throttled \(2 active\)$" line_of "$slow"
check "the array is canceled" banyan cancel "$slow"
check "... and ends" banyan job wait-event -t 20s "$slow" clean
check_output "... canceled" "^CA$" result_of "$slow"

