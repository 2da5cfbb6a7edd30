#!/bin/bash
# A shell that sends the exec service nonsense (fields of the wrong type,
# lines that are no JSON object, unknown types) costs one log line each:
# the broker lives on and the job still ends with the status the shell
# reports last. The shell is swapped through exec.job-shell.
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
