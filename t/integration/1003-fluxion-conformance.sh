#!/bin/bash
# Fluxion's own resource-query cases (../shared/conformance: basics, omitted
# prefixes, exclusivity, reservations, cancel and partial cancel), replayed
# against banyan-sched-query by the conformance runner: every case's -t
# output must equal Fluxion's expected file byte for byte.
. "$(dirname "$0")/lib.sh"

src=${BANYAN_SOURCE_DIR:-$(dirname "$0")/../..}
conf=$src/../shared/conformance/fluxion
[ -d "$conf" ] || conf=$src/shared/conformance/fluxion
runner=$conf/resource-query/run
check "the conformance runner is there ($runner)" test -x "$runner"

"$runner" "$(command -v banyan-sched-query)" --verbose >"$T_DIR/report" 2>&1
total=$(grep -cv '^#' "$conf/resource-query/cases.tsv")
check_output "all $total cases pass byte for byte" "^$total passed, 0 failed$" tail -1 "$T_DIR/report"
# The failures, if any, with their diffs, for whoever reads the log.
grep -A32 '^FAIL' "$T_DIR/report" | head -200
for script in t3001-resource-basic t3002-resource-prefix t3004-resource-excl t3005-resource-rsv \
    t3008-resource-cancel; do
    check_output "$script: every case" "^$script: ([0-9]+)/\\1$" grep "^$script:" "$T_DIR/report"
done
