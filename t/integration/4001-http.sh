#!/bin/bash
# The HTTP server at rank 0 (doc/spec/http.md): off unless configured;
# tokens (expired, another instance's, forged, another user's job); the REST
# API against doc/openapi.yaml; /metrics checked by promtool, with values
# that move as jobs run; Server-Sent Events; banyan events --follow; bad
# input of every kind answered with one JSON error, the broker still up.
. "$(dirname "$0")/lib.sh"
need_cores 2 "a REST job and a submitted one of -N2 -n3"
need_tools curl promtool python3

start_cluster 2 '[http]
listen = "127.0.0.1:0"
open = ["/"]'
CLEANUP+=("banyan shutdown")
wait_for "the instance runs" 20 banyan ready

URL=http://$(banyan uptime | sed -n 's,.*http http://,,p')
check_output "banyan uptime names the HTTP address" "^http://127\.0\.0\.1:[0-9]+$" echo "$URL"
TOKEN=$(banyan token create)
RECORDS=$T_DIR/records.jsonl

# call METHOD PATH [CURL ARGS...]: prints "STATUS BODY"; every answer is
# recorded for the OpenAPI check.
call() {
    local method=$1 path=$2
    shift 2
    curl -s -o "$T_DIR/body" -w '%{http_code} %{content_type}' -X "$method" "$@" "$URL$path" >"$T_DIR/meta"
    local status type
    read -r status type <"$T_DIR/meta"
    python3 -c 'import json,sys; print(json.dumps({"method": sys.argv[1], "path": sys.argv[2], "status": int(sys.argv[3]), "type": sys.argv[4], "body": open(sys.argv[5], errors="replace").read()}))' \
        "$method" "$path" "$status" "$type" "$T_DIR/body" >>"$RECORDS"
    echo "$status $(cat "$T_DIR/body")"
}
auth=(-H "Authorization: Bearer $TOKEN")
export -f call
export URL RECORDS T_DIR

# --- tokens ---
check_output "no token: 401 with a JSON message" '^401 \{"message":"no token' call GET /api/v1/jobs
check_output "a forged token: 401" '^401 .*signature does not match' \
    call GET /api/v1/jobs -H "Authorization: Bearer ${TOKEN%?}x"
check_output "not a JWT: 401" '^401 .*not a JWT' call GET /api/v1/jobs -H "Authorization: Bearer abc"
check_output "Basic instead of Bearer: 401" "^401 .*expected 'Bearer TOKEN'" \
    call GET /api/v1/jobs -H "Authorization: Basic dXNlcjpwYXNz"
short=$(banyan token create --expires 1s)
sleep 2.2
check_output "an expired token: 401" '^401 .*expired at' call GET /api/v1/jobs -H "Authorization: Bearer $short"
check_fails "--expires over a year refused" "expected a duration from 1s to 365d" banyan token create --expires 400d
check_fails "--user of no such user" "no such user" banyan token create --user no-such-user-here
# A token of another instance: signed with that instance's own key.
other=$(BANYAN_URI= HWLOC_SYNTHETIC="core:1 pu:1" banyan start --test-size=1 -S http.listen=127.0.0.1:0 \
    banyan token create)
check_output "a token of another instance: 401" '^401 .*(another instance|signature does not match)' \
    call GET /api/v1/jobs -H "Authorization: Bearer $other"
check_output "the token in the query (for EventSource)" '^200 \{"jobs"' call GET "/api/v1/jobs?access_token=$TOKEN"

# --- the API ---
id=$(banyan submit -n2 sh -c 'echo out-$BANYAN_TASK_RANK; sleep 1')
check_output "GET jobs lists a CLI job, its id as f58 text" "^200 \{\"jobs\":\[\{\"id\":\"$id\"" \
    call GET "/api/v1/jobs" "${auth[@]}"
check_output "GET jobs/{id}: the job, jobspec and R" "^200 .*\"job\":\{\"id\":\"$id\".*\"user\":\"$(id -un)\"" \
    call GET "/api/v1/jobs/$id" "${auth[@]}"
check_output "a decimal id works too" "^200 .*\"id\":\"$id\"" \
    call GET "/api/v1/jobs/$(banyan jobs -a --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')" "${auth[@]}"
check_output "banyan jobs -a --json: the f58 id beside the number" "\"id\":[0-9]+.*\"jobid\":\"$id\"" banyan jobs -a --json
# Should the stream stop short, what the job did meanwhile (its events'
# times, stored) and when the stream was given up are shown with it.
sse_to_end() {
    local out
    out=$(call GET "/api/v1/jobs/$1/eventlog?follow=1" --max-time 60 -H "Authorization: Bearer $TOKEN" | tr '\n' ' ')
    echo "$out"
    [[ $out == *"event: end"* ]] && return
    echo "given up at $(date +%s.%N); the job's stored events:"
    banyan job eventlog "$1" 2>&1 | tr -d '"'
}
export -f sse_to_end
export TOKEN
check_output "eventlog as Server-Sent Events, to the end" \
    '^200 event: job.*"name":"submit".*"name":"finish".*event: end' sse_to_end "$id"
check_output "eventlog as JSON" '^200 \{"events":\[\{"context"' call GET "/api/v1/jobs/$id/eventlog" "${auth[@]}"
check_output "a job not profiled has no profile (GET .../profile: 400, one line)" \
    '^400 \{"message":".*the job was not profiled \(--profile-ebpf\)"' call GET "/api/v1/jobs/$id/profile" "${auth[@]}"
# The two ranks' lines arrive in either order.
check_output "output of both tasks" '^200 \{"done":true.*("out-0\\n".*"out-1\\n"|"out-1\\n".*"out-0\\n")' \
    call GET "/api/v1/jobs/$id/output" "${auth[@]}"
check_output "POST jobs with submit's fields: 201" '^201 \{"id":"f' \
    call POST /api/v1/jobs "${auth[@]}" -d '{"command":["sh","-c","echo rest-$BANYAN_TASK_RANK"],"ntasks":2,"name":"viarest"}'
rid=$(sed 's/.*"id":"\([^"]*\)".*/\1/' "$T_DIR/body")
check "the REST job runs and completes" banyan job wait "$rid"
check_output "... under its name, with its output" "rest-0" banyan job attach "$rid"
check_output "POST jobs with a umask: the tasks make files with it" '^201 ' \
    call POST /api/v1/jobs "${auth[@]}" -d '{"command":["sh","-c","umask"],"umask":"0077"}'
masked=$(sed 's/.*"id":"\([^"]*\)".*/\1/' "$T_DIR/body")
check "... it runs" banyan job wait "$masked"
check_output "... and its tasks' umask is 0077" '^0077$' banyan job attach "$masked"
# One jobspec builder: REST's fields and submit's options make the same
# resources and tasks (held at urgency 0, so nothing runs).
resources_of() {
    banyan job info "$1" | python3 -c 'import json,sys; s=json.load(sys.stdin)["jobspec"]; print(json.dumps([s["resources"], s["tasks"][0]["count"], s["attributes"]["system"]["umask"]], sort_keys=True))'
}
call POST /api/v1/jobs "${auth[@]}" -d '{"command":["true"],"nodes":2,"ntasks":3,"cores_per_task":1,"urgency":0,"memory":"1G"}' >/dev/null
rest_held=$(sed 's/.*"id":"\([^"]*\)".*/\1/' "$T_DIR/body")
cli_held=$(umask 0022; banyan submit --urgency=0 -N2 -n3 --mem=1G true)
rest_spec=$(resources_of "$rest_held")
cli_spec=$(resources_of "$cli_held")
check "REST's fields and submit's options make the same jobspec, memory and all" \
    sh -c '[ "${1#*\"node\"}" != "$1" ] && [ "${1#*\"memory\"}" != "$1" ] && [ "$1" = "$2" ]' _ "$cli_spec" "$rest_spec"
banyan cancel "$rest_held" "$cli_held" >/dev/null
spec=$(banyan job info "$id" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["jobspec"]))')
check_output "POST jobs with a jobspec: 201" '^201 \{"id":"f' \
    call POST /api/v1/jobs "${auth[@]}" -d "{\"jobspec\": $spec, \"urgency\": 20}"
sleeper=$(banyan submit sleep 300)
check_output "POST cancel: 200" '^200 \{\}' call POST "/api/v1/jobs/$sleeper/cancel" "${auth[@]}" -d '{"note":"from REST"}'
check_fails "... the job ends canceled, with the note" "cancel: from REST" banyan job wait "$sleeper"
check_output "cancel of an inactive job: 409" '^409 .*job is inactive' \
    call POST "/api/v1/jobs/$sleeper/cancel" "${auth[@]}"
check_output "GET jobs?filter=canceled" "^200 \{\"jobs\":\[\{[^]]*\"id\":\"$sleeper\"[^]]*\]\}$" \
    call GET "/api/v1/jobs?filter=canceled" "${auth[@]}"
check_output "GET jobs?count=1" '^200 \{"jobs":\[\{[^]]*\}\]\}$' call GET "/api/v1/jobs?all=1&count=1" "${auth[@]}"
check_output "GET resources: each node" '^200 .*"nodes":\[\{"cores":[0-9]+,"cores_used"' \
    call GET /api/v1/resources "${auth[@]}"
check_output "GET queues" '^200 \{"queues":\[\]\}' call GET /api/v1/queues "${auth[@]}"
check_output "GET overlay" '^200 .*"size":2' call GET /api/v1/overlay "${auth[@]}"
check_output "GET activity" '^200 \{"period":10,"samples":\[\{' call GET /api/v1/activity "${auth[@]}"
wait_for "the canceled job has its record" 20 bash -c "banyan history -o '{id}' --no-header | grep -qx '$sleeper'"
check_output "GET history: records, ids as f58 text" "^200 \{\"records\":\[\{[^]]*\"id\":\"$sleeper\"" \
    call GET "/api/v1/history?results=canceled&count=5" "${auth[@]}"
check_output "GET history: a bad parameter, 400 naming it" "^400 .*unknown query parameter 'colour'" \
    call GET "/api/v1/history?colour=red" "${auth[@]}"
check_output "GET usage: per user and bank" '^200 \{"rows":\[\{"bank":"","core_seconds":[0-9.e+-]+,"cpu":[0-9.e+-]+,"gpu_seconds":0(\.0)?,"jobs":[1-9][0-9]*,"userid":[0-9]+\}\]\}$' \
    call GET "/api/v1/usage" "${auth[@]}"
check_output "GET usage?by=nope: 400" '^400 .*by: .nope. is not user or bank' call GET "/api/v1/usage?by=nope" "${auth[@]}"
check_output "GET events (SSE) sees a job submitted meanwhile" 'event: job.*"name":"submit"' \
    bash -c "(sleep 0.5; banyan submit true >/dev/null) & call GET /api/v1/events -H 'Authorization: Bearer $TOKEN' --max-time 2 | tr '\n' ' '; wait"

# --- permissions: a user's token, another's job ---
user_token=$(banyan token create --user nobody)
check_output "another user's job: 403" '^403 .*not your job' \
    call GET "/api/v1/jobs/$id" -H "Authorization: Bearer $user_token"
check_output "another user's cancel: 403" '^403 .*not your job' \
    call POST "/api/v1/jobs/$id/cancel" -H "Authorization: Bearer $user_token"
check_output "a user lists only their own jobs" '^200 \{"jobs":\[\]\}' \
    call GET "/api/v1/jobs?all=1" -H "Authorization: Bearer $user_token"
check_output "users=all is the owner's" '^403 .*only the instance owner' \
    call GET "/api/v1/jobs?users=all" -H "Authorization: Bearer $user_token"

# --- bad input: one JSON object each, naming what is wrong ---
check_output "malformed JSON: 400" '^400 \{"message":"the body: ' call POST /api/v1/jobs "${auth[@]}" -d '{"command":'
check_output "a field of the wrong type: 400 naming it" '^400 .*ntasks: expected' \
    call POST /api/v1/jobs "${auth[@]}" -d '{"command":["true"],"ntasks":"two"}'
check_output "fewer tasks than nodes: 400, as submit says it" '^400 .*ntasks: fewer tasks than nodes \(2\)' \
    call POST /api/v1/jobs "${auth[@]}" -d '{"command":["true"],"nodes":2,"ntasks":1}'
check_output "a umask that is not octal: 400 naming it" "^400 .*umask: '0999': expected octal" \
    call POST /api/v1/jobs "${auth[@]}" -d '{"command":["true"],"umask":"0999"}'
check_output "a memory size without a unit: 400 naming the field" "^400 .*memory: '4096': a size needs a unit" \
    call POST /api/v1/jobs "${auth[@]}" -d '{"command":["true"],"memory":"4096"}'
check_output "an unknown field: 400 naming it" '^400 .*colour: unknown field' \
    call POST /api/v1/jobs "${auth[@]}" -d '{"command":["true"],"colour":"red"}'
check_output "a bad jobspec: 400" '^400 ' call POST /api/v1/jobs "${auth[@]}" -d '{"jobspec":{"version":1}}'
check_output "an unknown query parameter: 400" "^400 .*unknown query parameter 'colour'" \
    call GET "/api/v1/jobs?colour=red" "${auth[@]}"
check_output "a bad filter: 400" '^400 .*filter=bogus: expected' call GET "/api/v1/jobs?filter=bogus" "${auth[@]}"
check_output "a job that does not exist: 404" '^404 .*no such job' call GET /api/v1/jobs/f1111111 "${auth[@]}"
check_output "not a job id: 404" '^404 .*no such job' call GET /api/v1/jobs/nope "${auth[@]}"
check_output "a wrong method: 405" '^405 .*only GET' call DELETE "/api/v1/jobs/$id" "${auth[@]}"
check_output "an unknown path: 404" '^404 .*no such path' call GET /api/v1/nothing "${auth[@]}"
head -c 100000000 /dev/zero | tr '\0' 'x' >"$T_DIR/big"
check_output "a body of 100 MB: 413" '^413 .*over 1048576 bytes' \
    call POST /api/v1/jobs "${auth[@]}" --data-binary @"$T_DIR/big"
check_output "path traversal in static files: 404" '^404$' \
    sh -c "curl -s --path-as-is -o /dev/null -w '%{http_code}' '$URL/../../../../etc/passwd'"
check_output "... escaped too: 404" '^404$' \
    sh -c "curl -s --path-as-is -o /dev/null -w '%{http_code}' '$URL/%2e%2e/%2e%2e/etc/passwd'"
check_output "garbage instead of HTTP: 400, then closed" '^HTTP/1.1 400' \
    sh -c "printf 'NOT HTTP AT ALL\r\n\r\n' | timeout 5 bash -c 'exec 3<>/dev/tcp/$(echo ${URL#http://} | tr : /); cat >&3; head -1 <&3' | sed 's,:.*,,;s,/[0-9]*$,,'"
check_output "the dashboard is open by config" '^200$' sh -c "curl -s -o /dev/null -w '%{http_code}' $URL/"
check_output "/metrics is not: 401" '^401$' sh -c "curl -s -o /dev/null -w '%{http_code}' $URL/metrics"
check_output "HEAD: the length, no body, and the connection still good" '^HTTP/1.1 200 .*Content-Length: [1-9][0-9]* .*HTTP/1.1 200 ' \
    sh -c "curl -s -I $URL/ $URL/index.html -H 'Connection: keep-alive' | tr -d '\r' | tr '\n' ' '"
check_output "a user's token cannot read the owner's metrics: 403" '^403$' \
    sh -c "curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer $user_token' $URL/metrics"
check "the broker is still up after all that" banyan ping 0

# --- metrics ---
curl -s "${auth[@]}" "$URL/metrics" >"$T_DIR/m1"
check "promtool check metrics passes" promtool check metrics <"$T_DIR/m1"
held=$(banyan submit -N2 --urgency=0 true)
running=$(banyan submit -n3 -c1 sleep 300)
curl -s "${auth[@]}" "$URL/metrics" >"$T_DIR/m2"
check "promtool check metrics passes with jobs pending and running" promtool check metrics <"$T_DIR/m2"
metric() { sed -n "s/^$1 //p" "$2"; }
check_output "submitted_total moved" "^yes$" \
    sh -c "[ $(metric banyan_jobs_submitted_total "$T_DIR/m2") -gt $(metric banyan_jobs_submitted_total "$T_DIR/m1") ] && echo yes"
check_output "a held job is pending demand: 2 nodes" "^2$" metric banyan_pending_demand_nodes "$T_DIR/m2"
check_output "3 cores allocated" '^3$' metric 'banyan_cores{state="allocated"}' "$T_DIR/m2"
check_output "nodes by state" '^2$' metric 'banyan_nodes{state="avail"}' "$T_DIR/m2"
check_output "overlay ranks online" '^2$' metric 'banyan_overlay_ranks{state="online"}' "$T_DIR/m2"
check_output "scheduling passes counted" '^[1-9][0-9]*$' metric banyan_sched_pass_seconds_count "$T_DIR/m2"
check_output "commits counted" '^[1-9][0-9]*$' metric banyan_job_commit_seconds_count "$T_DIR/m2"
check_output "rank 0's RSS" '^[1-9][0-9]{6,}$' metric banyan_rank0_resident_bytes "$T_DIR/m2"
check_output "jobs recorded by bank (none here)" '^[1-9][0-9]*$' metric 'banyan_bank_jobs_total{bank="none"}' "$T_DIR/m2"
check_output "and their core-seconds" '^[0-9.e+-]+$' metric 'banyan_bank_core_seconds_total{bank="none"}' "$T_DIR/m2"
banyan resource drain 1 "disk check"
curl -s "${auth[@]}" "$URL/metrics" >"$T_DIR/m3"
check_output "a drained node counted" '^1$' metric 'banyan_nodes{state="draining"}' "$T_DIR/m3"
banyan resource undrain 1
banyan cancel "$held" "$running" >/dev/null

# --- banyan events --follow ---
banyan events --follow --json >"$T_DIR/events" 2>&1 &
follower=$!
sleep 0.5
ev=$(banyan submit true)
banyan job wait "$ev" >/dev/null
wait_for "events --follow streams the job's events" 10 grep -q "\"jobid\":\"$ev\".*\"name\":\"clean\"" "$T_DIR/events"
kill -INT $follower
check "events --follow ends on SIGINT" wait $follower
check_output "every line is one JSON object" '^ok$' \
    python3 -c "import json,sys; [json.loads(l) for l in open('$T_DIR/events')]; print('ok')"
check_fails "events without --follow: one line" "give --follow" banyan events
check_output "events --follow as text: TIME JOBID NAME CONTEXT, and it ends when its output closes" \
    '^[0-9-]+T[0-9:.]+Z f[1-9A-HJ-NP-Za-km-z]+ submit \{"urgency":16,"userid":[0-9]+\}$' \
    bash -c "(sleep 0.5; banyan submit true >/dev/null) & timeout 20 banyan events --follow | head -1; wait"
check_fails "a token from an instance that serves no HTTP: one line" "serves no HTTP: set \[http\] listen" \
    env BANYAN_URI= HWLOC_SYNTHETIC="core:1 pu:1" banyan start --test-size=1 banyan token create

# --- banyan top ---
check_output "top -n 1: the summary and the running job" "brokers 2/2 online +cores [0-9]+/[0-9]+ in use.*" \
    banyan top -n 1
check_output "... lists the jobs as banyan jobs does" "JOBID +USER +NAME +ST" banyan top -n 1
check_output "top -A --iterations 2 --delay: two frames" '^2$' \
    bash -c "banyan top -A --iterations 2 --delay 0.1 | grep -c 'banyan top -'"
check_output "top on a terminal redraws in place until q" '^[3-9]$' \
    bash -c "timeout 30 script -qfc 'banyan top -d 0.3' /dev/null < <(sleep 1.5; printf q; sleep 5) | grep -c 'banyan top -'"
check_output "... and gives the terminal back (cursor shown)" 'ok' \
    bash -c "timeout 30 script -qfc 'banyan top -d 0.3' /dev/null < <(sleep 0.5; printf q; sleep 5) | grep -q \$'\\033\\[?25h' && echo ok"
check_output "Ctrl-C leaves top the same way" 'ok' \
    bash -c "timeout 30 script -qfc 'banyan top -d 0.3' /dev/null < <(sleep 0.5; printf '\\003'; sleep 5) | grep -q \$'\\033\\[?25h' && echo ok"

# --- progress bars: on a terminal or with --progress, never into a file unasked ---
check_output "submit --cc --progress: a bar on stderr" 'submit \[#{30}\] 20/20 100%' \
    bash -c "banyan submit --cc=1-20 --quiet --progress true 2>&1 >/dev/null | tr '\\r' '\\n'"
check_output "job wait --all --progress" 'wait \[#{30}\] [0-9]+/[0-9]+ 100%' \
    bash -c "timeout 60 banyan job wait --all --progress 2>&1 | tr '\\r' '\\n'"
check_output "no bar into a file without --progress" '^0$' \
    bash -c "banyan submit --cc=1-20 --quiet --urgency=0 true 2>'$T_DIR/nobar'; wc -c <'$T_DIR/nobar'"
check_output "cancel --all --progress" 'cancel \[#{30}\] [0-9]+/[0-9]+ 100%' \
    bash -c "banyan cancel --all --progress 2>&1 | tr '\\r' '\\n'"
check_output "a bar on a terminal, unasked" 'submit \[#{30}\] 20/20 100%' \
    bash -c "timeout 30 script -qfc 'banyan submit --cc=1-20 --quiet true' /dev/null | tr '\\r' '\\n'"

# --- the OpenAPI file: every answer above matches it, every path was called ---
check "every answer matches doc/openapi.yaml" python3 "$BANYAN_SOURCE_DIR/t/integration/openapi_check.py" \
    "$BANYAN_SOURCE_DIR/doc/openapi.yaml" "$RECORDS"
