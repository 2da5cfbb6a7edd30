#!/bin/bash
# banyan run --pty and banyan alloc --pty, driven as a user at a keyboard
# would (pty_drive.py gives the CLI a terminal): task 0 has a terminal of
# its own, the size of the user's; what is typed reaches it, Ctrl-C is its
# interrupt, a resize reaches it; an interactive shell runs, in an alloc
# too; the user's terminal is put back at the end. Without --pty a task
# has no terminal (and is never stopped reading the user's).
. "$(dirname "$0")/lib.sh"
need_tools python3

cp "$(dirname "$0")/pty_drive.py" "$T_DIR/drive"
inside() {
    D=$T_DIR/drive
    check_output "task 0 has a terminal of its own" "^/dev/pts/[0-9]+$" $D -- banyan run --pty tty
    check_output "... of the user's size" "^33 101$" $D size:33,101 -- banyan run --pty stty size
    check_output "without --pty a task has none, even from a terminal" "^not a tty$" $D -- banyan run tty
    check_output "an interactive shell reads what is typed" "hi-42$" \
        $D "expect:[#$] " 'send:echo hi-$((40+2))\r' "expect:hi-42" 'send:exit 7\r' -- banyan run --pty bash --norc -i
    last_out; cp "$LAST_OUT" "$T_DIR/driven.out"
    check_output "... and its exit status is run's" "^status 7$" cat "$T_DIR/driven.out"
    check_output "Ctrl-C is the task's interrupt" "got-INT$" \
        $D expect:ready 'send:\x03' -- banyan run --pty sh -c 'trap "echo got-INT; exit 3" INT; echo ready; while :; do sleep 0.1; done'
    last_out; cp "$LAST_OUT" "$T_DIR/driven.out"
    check_output "... which ends as it chose" "^status 3$" cat "$T_DIR/driven.out"
    check_output "Ctrl-D ends the task's input" "^status 0$" \
        $D expect:ready 'send:abc\r' 'expect:abc\s+abc' 'send:\x04' -- banyan run --pty sh -c 'echo ready; exec cat'
    check_output "a signal for the job reaches the command its shell runs in the foreground (--signal)" \
        "after-sleep-138$" \
        $D "expect:[#$] " 'send:sleep 30; echo after-sleep-$?\r' "expect:after-sleep-[0-9]+" 'send:exit 0\r' -- \
        banyan run --pty -t 10s --signal=USR1@8 bash --norc -i
    check_output "a resize of the user's terminal reaches it (SIGWINCH, the new size)" "^40 120$" \
        $D expect:ready resize:40,120 -- banyan run --pty sh -c 'trap "stty size; exit 4" WINCH; echo ready; while :; do sleep 0.1; done'
    check_output "the user's terminal is cooked again afterwards" "^ icanon$" \
        $D -- sh -c 'banyan run --pty true; stty -a | grep -o " -*icanon"'
    check_output "an interactive shell in banyan alloc --pty (the foreground of its terminal)" "in-5$" \
        $D "expect:[#$] " 'send:echo in-$((2+3))\r' "expect:in-5" 'send:exit 5\r' -- banyan alloc --pty -N1 bash --norc -i
    last_out; cp "$LAST_OUT" "$T_DIR/driven.out"
    check_output "... and its exit status is alloc's" "^status 5$" cat "$T_DIR/driven.out"
    check_fails "--pty with --output is refused in one line" \
        "^banyan run: --pty: task 0 reads and writes its terminal: not with --input, --output, --error or -l$" \
        banyan run --pty --output="$T_DIR/x" true
    check_fails "a bad -o pty is refused at submit, naming it" '^banyan submit: -o pty="sometimes": expected true, false or' \
        banyan submit -o pty=sometimes true
}
export -f inside
if banyan start --test-size=1 bash -c inside; then ok "instance ran"; else not_ok "instance ran"; fi
