#!/bin/bash
# Node features and constraints (RFC 31): properties from config and from
# discovery are shown by resource list/status and matched by --requires;
# a constraint no node can meet is refused at once naming the term; bad
# input is one line and submits nothing.
. "$(dirname "$0")/lib.sh"

# Ranks 0-1: 1 GiB of memory; ranks 2-3: 8 GiB. Two cores each.
for r in 0 1; do lstopo-no-graphics -i "pack:1 core:2 pu:1" --of xml "$T_DIR/rank$r.xml" 2>/dev/null; done
for r in 2 3; do
    lstopo-no-graphics -i "pack:1 numa:1(memory=8589934592) core:2 pu:1" --of xml "$T_DIR/rank$r.xml" 2>/dev/null
done
# Quoted: a TOML string (a rank idset or a hostlist), not the number 3.
settings="-S resource.hwloc_xml=$T_DIR/rank%r.xml -S resource.properties.gpu-a100=2-3 -S resource.properties.bigmem=\"3\""
export settings

ranks_of_run() { "$@" sh -c 'echo "${BANYAN_URI##*/rank-}"' | sed 's,/.*,,' | sort -un | paste -sd, -; }
export -f ranks_of_run

inside() {
    check_output "list --properties: gpu-a100 on 2 nodes, both free" "^gpu-a100 +2 +2 " banyan resource list --properties
    check_output "list --properties: bigmem on 1" "^bigmem +1 +1 " banyan resource list --properties
    check_output "discovered: memory-gib=8 on 2 nodes" "^memory-gib=8 +2 " banyan resource list --properties
    check_output "discovered: memory-gib=1 on 2 nodes" "^memory-gib=1 +2 " banyan resource list --properties
    check_output "discovered: the architecture on every node" "^arch=[^ ]+ +4 +4 " banyan resource list --properties
    check_output "status --properties groups nodes by their properties" \
        "avail +1 +3 .*bigmem,gpu-a100,memory-gib=8" banyan resource status --properties
    check_output "the JSON carries them" '"properties":\{.*"gpu-a100":\{"nfree":2,"nnodes":2,' \
        banyan resource list --json

    # Placement.
    check_output "--requires=gpu-a100: rank 2 or 3" "^[23]$" ranks_of_run banyan run -N1 -n1 --requires=gpu-a100
    check_output "gpu-a100,^bigmem: rank 2" "^2$" ranks_of_run banyan run -N1 -n1 --requires='gpu-a100,^bigmem'
    check_output "a discovered property: memory-gib=8 on two nodes" "^2,3$" \
        ranks_of_run banyan run -N2 -n2 --requires=memory-gib=8
    check_output "not gpu-a100: ranks 0 and 1" "^0,1$" ranks_of_run banyan run -N2 -n2 --requires='not gpu-a100'
    check_output "or, host and rank terms" "^0,3$" \
        ranks_of_run banyan run -N2 -n2 --requires="rank:0 or bigmem"
    check_output "two --requires are both met" "^3$" \
        ranks_of_run banyan run -N1 -n1 --requires=gpu-a100 --requires='-rank:2'
    check_output "RFC 31 JSON in the jobspec works too" "^3$" \
        ranks_of_run banyan run -N1 -n1 -S 'constraints={"properties":["bigmem"]}'

    # The profile hint: cpu spreads four 1-core tasks over the four nodes;
    # network packs two onto one node (so does the default, pack).
    check_output "-o profile=cpu: one task per node" "^0,1,2,3$" ranks_of_run banyan run -n4 -o profile=cpu
    check_output "-o profile=network: one node" "^[0-3]$" ranks_of_run banyan run -n2 -o profile=network
    check_fails "an unknown profile is one line" "profile.*expected network, cpu or memory" \
        banyan submit -n1 -o profile=io true

    # Never satisfiable: refused at once, the term named.
    check_fails "an unknown property is named" "no node has the property 'gpu-h100'" \
        timeout 10 banyan run -N1 -n1 --requires=gpu-h100 true
    check_fails "a term no node meets is named" "no node satisfies 'gpu-a100 and rank:0'" \
        timeout 10 banyan run -N1 -n1 --requires='gpu-a100 and rank:0' true
    check_fails "too few nodes meet it" "the 2 nodes that satisfy 'gpu-a100' can never hold this request" \
        timeout 10 banyan run -N3 -n3 --requires=gpu-a100 true

    # A drained node that meets it: the job waits for it, and runs after.
    check "drain rank 3" banyan resource drain 3 bios update
    waiting=$(banyan submit -N1 -n1 --requires=bigmem true)
    wait_for "the bigmem job waits, and says why" 10 \
        sh -c "banyan jobs -o '{id} {st} {info}' | grep -q '$waiting  *S waiting for drained, down or unjoined nodes'"
    check "undrain rank 3" banyan resource undrain 3
    check "then it runs" timeout 20 banyan job wait "$waiting"

    # Bad input: one line, nothing submitted.
    before=$(banyan jobs -a -n 1000 --no-header | wc -l)
    check_fails "an unclosed parenthesis" "^banyan submit: --requires '\(gpu': a '\(' is not closed$" \
        banyan submit --requires='(gpu' true
    check_fails "an unknown operator" "'zone:a': unknown operator 'zone'" banyan submit --requires=zone:a true
    check_fails "a bad rank set" "--requires 'rank:3-1'" banyan submit --requires=rank:3-1 true
    check_fails "a malformed JSON constraint" "attributes.system.constraints: unknown operator 'prop'" \
        banyan submit -S 'constraints={"prop":["x"]}' true
    check "nothing was submitted" test "$(banyan jobs -a -n 1000 --no-header | wc -l)" = "$before"
}
export -f inside
if banyan start --test-size=4 $settings bash -c inside; then ok "instance ran"; else not_ok "instance ran"; fi

# Bad config: one line naming the key, and no instance.
check_fails "a property that is not a string" "resource.properties.x: expected a string, got integer" \
    timeout 20 banyan start --test-size=1 -S resource.properties.x=3 true
check_fails "a property naming an unknown rank" "resource.properties.x: no rank 7 in this instance" \
    timeout 20 banyan start --test-size=1 -S 'resource.properties.x="7"' true
printf '[bootstrap]\nsize = 1\n[resource]\nproperties = { "a b" = "0" }\n' >"$T_DIR/bad.toml"
check_fails "a property name with a blank" "resource.properties.a b: property 'a b': ' ' is not allowed" \
    timeout 20 banyan start --config "$T_DIR/bad.toml" -- true

# An R file's properties (resource.path) are the nodes' too.
cat >"$T_DIR/R.json" <<'JSON'
{"version": 1, "execution": {"R_lite": [{"rank": "0", "children": {"core": "0-1"}}],
 "nodelist": ["fake0"], "starttime": 0, "expiration": 0, "properties": {"ssd": "0"}}}
JSON
check_output "R's properties are listed and required" "^0$" \
    banyan start --test-size=1 -S resource.path="$T_DIR/R.json" sh -c \
    'banyan resource list --properties | grep -q "^ssd  *1  *1 " && banyan run -n1 --requires=ssd sh -c "echo \${BANYAN_URI##*/rank-}" | sed "s,/.*,,"'
