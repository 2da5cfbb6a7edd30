# A multi-user instance as a site runs one, for the tests that need one
# (0012, 0016): four brokers as an unprivileged service user, banyan-imp
# setuid root in its group, MUNGE, a prolog and an epilog. Source it after
# lib.sh, then call start_multi_user [TOML]: TOML goes into the brokers'
# config. It sets SVC ALICE BOB PROJ (user names), P (the installed
# prefix), IMP, BANYAN_URI and PATH, and defines `as USER CMD...`. The
# brokers get the variables of the array BROKER_ENV (NAME=VALUE) if set,
# and the keys of MULTI_USER_EXEC in their [exec] table.
start_multi_user() {
    need_root "makes users, a setuid helper and runs munged"
    need_tools useradd munged runuser

    SVC=bnyt-svc ALICE=bnyt-alice BOB=bnyt-bob PROJ=bnyt-proj
    remove_users() {
        for u in $ALICE $BOB $SVC; do pkill -KILL -u "$u" 2>/dev/null; done
        for u in $ALICE $BOB $SVC; do userdel "$u" 2>/dev/null; done
        for g in $PROJ $SVC; do groupdel "$g" 2>/dev/null; done
    }
    remove_users
    CLEANUP+=("remove_users")
    groupadd "$PROJ"
    useradd --system --user-group --no-create-home --shell /usr/sbin/nologin "$SVC"
    mkdir -p "$T_DIR/home"
    useradd --no-create-home --home-dir "$T_DIR/home/alice" --groups "$PROJ" --shell /bin/bash "$ALICE"
    useradd --no-create-home --home-dir "$T_DIR/home/bob" --shell /bin/sh "$BOB"
    install -d -o "$ALICE" -m 0700 "$T_DIR/home/alice"
    install -d -o "$BOB" -m 0700 "$T_DIR/home/bob"

    need_munged

    # The installed tree, as a package lays it out; the helper as postinst makes it.
    P=$T_DIR/prefix
    cmake --install "$BANYAN_BUILD_DIR" --prefix "$P" >"$T_DIR/install.log" 2>&1 || { cat "$T_DIR/install.log"; exit 1; }
    IMP=$P/libexec/banyan/banyan-imp
    chown "root:$SVC" "$IMP"
    chmod 4750 "$IMP"
    cat >"$P/etc/banyan/imp.toml" <<TOML
allowed-users = ["$SVC"]
state-dir = "$T_DIR/imp-state"
prolog = "$T_DIR/prolog.sh"
epilog = "$T_DIR/epilog.sh"
profiling = ${MULTI_USER_PROFILING:-false}
TOML
    # Prolog and epilog (root's, through banyan-imp): they log who ran them for
    # which job; the prolog fails for bob once $T_DIR/fail-prolog exists.
    cat >"$T_DIR/prolog.sh" <<SH
#!/bin/sh
echo "\$(id -u) \$BANYAN_JOB_ID \$BANYAN_JOB_USER \$BANYAN_JOB_RANK" >>"$T_DIR/prolog.out"
if [ "\$BANYAN_JOB_USER" = $BOB ] && [ -e "$T_DIR/fail-prolog" ]; then echo "scratch is full" >&2; exit 3; fi
SH
    cat >"$T_DIR/epilog.sh" <<SH
#!/bin/sh
echo "\$(id -u) \$BANYAN_JOB_ID \$BANYAN_JOB_USER" >>"$T_DIR/epilog.out"
SH
    chmod 755 "$T_DIR/prolog.sh" "$T_DIR/epilog.sh"

    # Four brokers as the service user, rank 0's socket open to users.
    port=$(free_port)
    "$P/bin/banyan" keygen "$T_DIR/cert" >/dev/null
    chown "$SVC" "$T_DIR/cert"
    write_config "$T_DIR/c.toml" 4 "$port" "$T_DIR/cert" "[exec]
imp = \"$IMP\"
${MULTI_USER_EXEC:-}
prolog = \"$IMP run prolog\"
epilog = \"$IMP run epilog\"
[access]
admins = []
${1:-}"
    for r in 0 1 2 3; do
        install -d -o "$SVC" -m 0755 "$T_DIR/rank-$r"
        runuser -u "$SVC" -- env "${BROKER_ENV[@]+"${BROKER_ENV[@]}"}" "$P/sbin/banyan-broker" --config "$T_DIR/c.toml" --rank "$r" --rundir "$T_DIR/rank-$r" \
            >>"$T_DIR/rank-$r.log" 2>&1 &
    done
    export BANYAN_URI=local://$T_DIR/rank-0/local.sock
    export PATH=$P/bin:$PATH
    wait_for "4 brokers up" 30 all_up 4
    as() { local user=$1; shift; runuser -u "$user" -- env BANYAN_URI="$BANYAN_URI" PATH="$PATH" "$@"; }
    export -f as
    # Where requests to banyan-imp below put their jobs' run directories.
    mkdir -p "$T_DIR/impjobs" && chown "$SVC" "$T_DIR/impjobs" && chmod 0755 "$T_DIR/impjobs"
}

# Asking banyan-imp as the broker does (the tests ask it themselves, as a
# leaked service account would): R_of, req, imp, imp_bare.
# R_of RANKS [HOST]: a job's R, its ranks on HOST (this one by default).
R_of() {
    local host=${2:-$(hostname)} n hosts=""
    for n in $(seq "$(echo "$1" | tr ',' ' ' | wc -w)"); do hosts+="${hosts:+,}\"$host\""; done
    printf '{"version":1,"execution":{"R_lite":[{"rank":"%s","children":{"core":"0"}}],"nodelist":[%s]}}' "$1" "$hosts"
}
# req ID RANK USERID J TMPDIR [R]
req() {
    printf '{"id":%s,"rank":%s,"userid":%s,"J":"%s","tmpdir":"%s","R":%s}' "$1" "$2" "$3" "$4" "$5" "${6:-$(R_of "$2")}"
}
# (The broker makes each job's tmpdir before it asks: as here, unless the
# request is about a tmpdir that is not there. The shell's stdin is a pipe
# at its end, as a broker's that stopped: a shell that started exits.)
imp() {
    local dir
    dir=$(echo "$1" | sed 's/.*"tmpdir":"\([^"]*\)".*/\1/')
    [ -d "$(dirname "$dir")" ] && runuser -u "$SVC" -- mkdir -p "$dir"
    imp_bare "$1"
}
imp_bare() { runuser -u "$SVC" -- "$IMP" exec 3<<<"$1" < <(:); }
