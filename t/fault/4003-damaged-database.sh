#!/bin/bash
# Rank 0 never starts on a job database it cannot trust, and never starts
# empty in its place: a file that is not a database, another program's
# database, one of a newer schema, or one cut short (a disk that lost its
# tail). Each start is refused with one line naming the file, and the file
# is left as it was for the admin to look at.
. "$(dirname "$0")/../integration/lib.sh"

refused() {  # DESC REGEX STATEDIR
    local before
    before=$(md5sum "$3/jobs.db")
    check_fails "$1: refused" "$2" banyan start --test-size=1 --statedir "$3" true
    last_out; cp "$LAST_OUT" "$T_DIR/refusal.out"
    check_output "$1: the broker said it in one line" "^1 $3/jobs.db: " \
        sh -c "grep -c '^banyan-broker' $T_DIR/refusal.out | tr '\n' ' '; grep '^banyan-broker' $T_DIR/refusal.out | cut -d' ' -f2-"
    check_output "$1: the file is left as it was" "^$before$" md5sum "$3/jobs.db"
}

mkdir "$T_DIR/garbage" "$T_DIR/foreign" "$T_DIR/newer" "$T_DIR/short" "$T_DIR/good"
head -c 65536 /dev/urandom >"$T_DIR/garbage/jobs.db"
refused "random bytes" "file is not a database" "$T_DIR/garbage"

python3 -c "
import sqlite3; db = sqlite3.connect('$T_DIR/foreign/jobs.db')
db.execute('CREATE TABLE invoices (id INTEGER, amount REAL)'); db.execute('INSERT INTO invoices VALUES (1, 9.5)'); db.commit()"
refused "another program's database" "not a Banyan database \(its tables: invoices\)" "$T_DIR/foreign"

banyan start --test-size=1 --statedir "$T_DIR/good" sh -c 'banyan submit --cc=1-200 -S exec.test.run_duration=0 true >/dev/null; banyan job wait --all'
check "a good database to damage" banyan start --test-size=1 --statedir "$T_DIR/good" \
    sh -c "[ \$(banyan jobs -a --no-header | wc -l) -eq 200 ]"
cp "$T_DIR/good/jobs.db" "$T_DIR/newer/jobs.db"
python3 -c "
import sqlite3; db = sqlite3.connect('$T_DIR/newer/jobs.db')
db.execute(\"UPDATE meta SET value = '2' WHERE key = 'schema_version'\"); db.commit()"
refused "a newer schema" "schema version 2 \(this broker reads version 1\)" "$T_DIR/newer"

size=$(stat -c %s "$T_DIR/good/jobs.db")
head -c $((size / 2)) "$T_DIR/good/jobs.db" >"$T_DIR/short/jobs.db"
refused "cut in half" "malformed|not a database|truncated|corrupt" "$T_DIR/short"
