#!/bin/bash
# The web dashboard (doc/spec/http.md §6) in headless Chromium: a job
# submitted from the CLI appears, runs and completes on the queue page; its
# own page shows the eventlog and output; a drained node shows its reason;
# the broker tree and the plots draw. A screenshot of each page is kept in
# BUILD/t/artifacts/ (a phone-sized one of the queue too).
. "$(dirname "$0")/lib.sh"
need_tools chromium

start_cluster 2 '[http]
listen = "127.0.0.1:0"
open = ["/metrics"]'
CLEANUP+=("banyan shutdown")
wait_for "the instance runs" 20 banyan ready
URL=http://$(banyan uptime | sed -n 's,.*http http://,,p')
TOKEN=$(banyan token create)
ARTIFACTS=${BANYAN_BUILD_DIR:-$T_DIR}/t/artifacts
mkdir -p "$ARTIFACTS"

# browse VIEW [CHROMIUM ARGS...]: the page's DOM once its scripts ran a while.
# As the probe of this machine starts it: no network beyond the instance.
browse() {
    local view=$1
    shift
    chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
        --disable-component-update --disable-sync --user-data-dir="$T_DIR/chromium" --virtual-time-budget=4000 --lang=en-US \
        "$@" "$URL/?access_token=$TOKEN#$view" 2>>"$T_DIR/chromium.log"
}
dom() { browse "$1" --dump-dom | tr '\n' ' '; }
shot() { browse "$1" --window-size="${2:-1280,800}" --screenshot="$ARTIFACTS/dashboard-$3.png" >/dev/null; }
export -f browse dom
export URL TOKEN

check_output "without a token the page is refused" '^401$' sh -c "curl -s -o /dev/null -w '%{http_code}' $URL/"
check_output "... while /metrics, open by config, is served without one" '^200 # HELP banyan_jobs ' \
    sh -c "curl -s -w '%{http_code} ' -o '$T_DIR/m' $URL/metrics; head -1 '$T_DIR/m'"
check_output "the page loads its own files only (no CDN)" '^ok$' \
    sh -c "curl -s '$URL/?access_token=$TOKEN' | grep -Eq 'src=\"https?:|href=\"https?:' && echo cdn || echo ok"

# The job runs until the test lets it end: the page is looked at while it runs.
id=$(banyan submit --job-name=web-probe -t 10m sh -c "echo from-the-job; while [ ! -e '$T_DIR/go' ]; do sleep 0.1; done")
wait_for "the job runs" 10 sh -c "banyan jobs -o '{id} {state}' | grep -q '$id run'"
check_output "the queue page shows the CLI job running" "<tr data-job=\"$id\" data-state=\"run\"" dom queue
# A job that needs both nodes waits for it: the scheduler's reserved
# start (the probe's start and its 10 minutes) is on the page.
wide=$(banyan submit -N2 --exclusive -t 1m true)
expected=$(banyan jobs -o '{id} {t_estimate}' | awk -v id="$wide" '$1 == id {print $2}')
check "the CLI has its expected start (10 min from now)" \
    test "${expected:-0}" -ge $(($(date +%s) + 500)) -a "${expected:-0}" -le $(($(date +%s) + 601))
# (The page writes the browser's local time, in the time zone `date` has,
# in en-US: its minutes and seconds are these.)
at=$(date -d "@${expected:-0}" +%M:%S)
check_output "the queue page shows it, and why the job waits" \
    "<tr data-job=\"$wide\" data-state=\"sched\"[^>]*><td>.*title=\"insufficient resources\".*<td class=\"estimate\">~[^<]*$at[^<]*</td>" \
    dom queue
banyan cancel "$wide"
shot queue 1280,800 queue
shot queue 390,844 queue-phone
touch "$T_DIR/go"
banyan job wait "$id" >/dev/null
check_output "... and then completed" "<tr data-job=\"$id\" data-state=\"inactive\" data-result=\"completed\"" dom queue
check_output "the filter box is there, and the columns sort" '<th class="sorted desc" data-key="t_submit">' dom queue

check_output "the job's page: its eventlog" 'id="eventlog">[^<]*submit[^<]*finish[^<]*clean' dom "job/$id"
check_output "... its output" 'id="output">from-the-job </pre>' dom "job/$id"
check_output "... its R" 'id="R">\{' dom "job/$id"
shot "job/$id" 1280,1000 job
# A job profiled with eBPF (doc/spec/profiling.md) plots where its time
# went; where profiles cannot be loaded here (not root, no BTF), 0019 says
# why, and this page is checked without one.
if [ "$(id -u)" = 0 ] && [ -x "$BANYAN_BUILD_DIR/bin/banyan-profiler" ] && [ -r /sys/kernel/btf/vmlinux ]; then
    pid=$(banyan submit --profile-ebpf=cpu,futex --profile-ebpf-interval=1 sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done')
    banyan job wait "$pid" >/dev/null
    check_output "a profiled job's page plots its profile" '<canvas id="profile"[^>]*data-samples="[1-9]' dom "job/$pid"
fi
check_output "a job not profiled has no profile plot" '<canvas id="profile" hidden=""' dom "job/$id"

banyan resource drain 1 "fan failure in bay 3"
check_output "a drained node shows its reason" \
    'data-state="drained".*<div class="reason">fan failure in bay 3</div>' dom nodes
check_output "... and an available one its load" 'data-state="avail".*0/[0-9]+ cores' dom nodes
shot nodes 1280,800 nodes
banyan resource undrain 1

check_output "the broker tree: rank 0 above rank 1, both online" \
    '<li data-rank="0" class="rank-online">rank 0 · online<ul><li data-rank="1" class="rank-online">' dom tree
shot tree 1280,800 tree
check_output "the plots draw from the history ring" '<canvas id="depth"[^>]*data-samples="[1-9][0-9]*"' dom plots
shot plots 1280,800 plots

check_output "a screenshot of each page was kept" '^6$' sh -c "ls '$ARTIFACTS'/dashboard-*.png | wc -l"
check_output "... and each is a real picture" '^ok$' \
    sh -c "for f in '$ARTIFACTS'/dashboard-*.png; do [ \$(stat -c %s \"\$f\") -gt 5000 ] || exit 1; done; echo ok"
