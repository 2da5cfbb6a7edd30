#!/bin/bash
# A shell that sends the exec service nonsense (fields of the wrong type,
# lines that are no JSON object, unknown types) costs one log line each:
# the broker lives on and the job still ends with the status the shell
# reports last. The shell is swapped through exec.job-shell. The other
# way, a job line the shell cannot read ends the job at once.
. "$(dirname "$0")/lib.sh"

cat >"$T_DIR/bad-shell" <<'SHELL'
#!/bin/bash
read -r job
printf '%s\n' '{"type":5}' '{"type":"exception","severity":"high","note":1}' '{"type":"fence","seq":"x"}' \
    '{"type":"finish","status":"zero"}' 'not json' '[1,2]' '{"no":"type"}' '{"type":"bogus"}' \
    '{"type":"output","task":"x","stream":7,"data":5}' '{"type":"started"}' '{"type":"finish","status":3}'
SHELL
chmod 755 "$T_DIR/bad-shell"

cat >"$T_DIR/inside.sh" <<'SCRIPT'
set -u
check_output "a job whose shell sends nonsense ends with the status it reports last" "^3$" \
    sh -c 'banyan run true; echo $?'
check_output "the broker lives on" "rank=0" banyan ping 0
check_output "the wrong types are logged, naming the field" "from the shell: shell.severity" banyan dmesg
check_output "a line that is no JSON is logged" "from the shell: .*(parse|JSON|json)" banyan dmesg
check_output "an unknown type is logged" "unknown message from the shell" banyan dmesg
check_output "a second job runs the same way" "^3$" sh -c 'banyan run true; echo $?'
SCRIPT
banyan start --test-size=1 -S exec.job-shell="\"$T_DIR/bad-shell\"" bash "$T_DIR/inside.sh"

# The other way: a job line the shell cannot read (the exec service passes
# the jobspec on unparsed) ends the job with one exception, not a shell
# that waits for a job forever.
check_output "an unreadable job line: the shell reports an exception" \
    '^\{"exception":"exec","note":"the job.s line: a line that is not a JSON object"' \
    sh -c "echo '{\"id\":1,\"jobspec\":{\"a\":tru}}' | timeout 10 banyan-shell | head -1"
check_output "... and finish with status 1, and exits" '"status":1,.*"type":"finish"' \
    sh -c "echo '{\"id\":1,\"jobspec\":{\"a\":tru}}' | timeout 10 banyan-shell | sed -n 2p"
