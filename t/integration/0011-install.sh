#!/bin/bash
# `cmake --install` lays Banyan out as FHS says, and the installed programs
# find each other from any prefix: an instance runs from the installed
# tree, man finds the pages, systemd-analyze accepts the unit.
. "$(dirname "$0")/lib.sh"

P=$T_DIR/prefix
cmake --install "$BANYAN_BUILD_DIR" --prefix "$P" >"$T_DIR/install.log" 2>&1
check "cmake --install succeeds" test $? = 0
for f in bin/banyan bin/banyan-sched-query sbin/banyan-broker libexec/banyan/banyan-shell libexec/banyan/banyan-imp; do
    check "$f is installed and executable" test -x "$P/$f"
done
for f in share/man/man1/banyan.1.gz share/man/man1/banyan-submit.1.gz share/man/man5/banyan.toml.5.gz \
    share/man/man8/banyan-broker.8.gz share/man/man8/banyan-imp.8.gz etc/banyan/banyan.toml etc/banyan/imp.toml \
    lib/systemd/system/banyan.service share/bash-completion/completions/banyan share/doc/banyan/README.md \
    share/banyan/web/index.html share/banyan/web/app.js share/banyan/web/style.css; do
    check "$f is installed" test -s "$P/$f"
done
check "every doc/man page is installed as a man page" \
    test "$(ls "$BANYAN_SOURCE_DIR"/doc/man/*.md | wc -l)" = "$(find "$P/share/man" -name '*.gz' | wc -l)"
check_output "man -w finds banyan-submit" "$P/share/man/man1/banyan-submit.1.gz" \
    env MANPATH="$P/share/man" man -w banyan-submit
check_output "the page renders with its examples" "EXAMPLES" \
    env MANPATH="$P/share/man" MANWIDTH=80 man banyan-submit
check_output "the unit runs the installed broker with the installed config" \
    "^ExecStart=$P/sbin/banyan-broker --config $P/etc/banyan/banyan.toml " cat "$P/lib/systemd/system/banyan.service"
# What `systemctl stop` and `restart` keeping the jobs relies on (README,
# banyan-broker(8)): only the broker is signalled, and the shells' run
# directories (their re-attach sockets) stay.
check_output "a stop signals the broker alone (KillMode=process)" "^KillMode=process$" \
    cat "$P/lib/systemd/system/banyan.service"
check_output "and /run/banyan outlives it (RuntimeDirectoryPreserve=yes)" "^RuntimeDirectoryPreserve=yes$" \
    cat "$P/lib/systemd/system/banyan.service"
# The installed config names the helper: a broker refuses one that is not
# setuid root, in one line, before anything runs.
check_fails "exec.imp naming a helper that is not setuid root: refused at start" \
    "^banyan-broker: exec.imp: .*not setuid root \(chown root:banyan; chmod 4750\)$" \
    timeout 20 "$P/sbin/banyan-broker" --config "$P/etc/banyan/banyan.toml" --rundir "$T_DIR/r0"
check_fails "exec.imp naming a missing helper: refused at start" "^banyan-broker: exec.imp: /nonexistent: No such file" \
    timeout 20 "$P/sbin/banyan-broker" --config "$P/etc/banyan/banyan.toml" -S exec.imp=/nonexistent --rundir "$T_DIR/r1"
check_fails "a prolog that does not exist: refused at start" \
    "^banyan-broker: exec.prolog: /nonexistent/prolog: No such file or directory$" \
    timeout 20 "$P/sbin/banyan-broker" --config "$P/etc/banyan/banyan.toml" -S exec.prolog=/nonexistent/prolog \
    --rundir "$T_DIR/r2"
if command -v systemd-analyze >/dev/null; then
    # verify checks that ExecStart's program exists and the unit's syntax;
    # the user banyan need not exist for that.
    check "systemd-analyze verify accepts banyan.service" \
        sh -c "MANPATH='$P/share/man' systemd-analyze verify '$P/lib/systemd/system/banyan.service' 2>&1 | tee '$T_DIR/verify.log'; \
               ! grep -v -e 'Failed to .*user' -e '^$' '$T_DIR/verify.log' | grep -q ."
fi

# The installed programs, not the build tree's: PATH has only the prefix.
cat >"$T_DIR/run.sh" <<'SCRIPT'
check_output "the installed start finds the installed broker and shell" "^2$" \
    sh -c 'banyan run -N2 hostname | wc -l'
check_output "the installed broker serves the installed dashboard" "<title>Banyan</title>" \
    sh -c 'curl -s "http://$(banyan uptime | sed -n "s,.*http http://,,p")/?access_token=$(banyan token create)"'
SCRIPT
env PATH="$P/bin:/usr/bin:/bin" "$P/bin/banyan" start --test-size=2 -S http.listen=127.0.0.1:0 bash "$T_DIR/run.sh"
check "the instance ran from the installed tree" test $? = 0

check_output "the bash completion offers subcommands" "submit" \
    bash -c ". '$P/share/bash-completion/completions/banyan'; PATH='$P/bin':\$PATH; COMP_WORDS=(banyan su); COMP_CWORD=1; _banyan; echo \${COMPREPLY[@]}"

# Outside any instance, the CLI looks for the system instance and says so.
check_fails "no BANYAN_URI and no system instance: one line naming both" \
    "no instance: BANYAN_URI is not set and no system instance answers at /run/banyan/local.sock" \
    env -u BANYAN_URI "$P/bin/banyan" jobs
