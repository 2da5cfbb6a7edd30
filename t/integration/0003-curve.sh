#!/bin/bash
# CURVE security between brokers over TCP: a broker holding another
# certificate is refused and the refusal logged; so is a client that knows
# the cluster's public key but not its secret; a certificate others can read
# is refused; TCP without a certificate is refused.
. "$(dirname "$0")/lib.sh"

check "keygen writes the cluster certificate" banyan keygen "$T_DIR/good.cert"
check "keygen writes a second one" banyan keygen "$T_DIR/other.cert"
check_output "keygen makes it private (0600)" "^600$" stat -c %a "$T_DIR/good.cert"
check_fails "keygen will not overwrite a certificate" "good.cert: File exists" banyan keygen "$T_DIR/good.cert"

port=$(free_port)
write_config "$T_DIR/good.toml" 2 "$port" "$T_DIR/good.cert"
write_config "$T_DIR/other.toml" 2 "$port" "$T_DIR/other.cert"

start_broker "$T_DIR/good.toml" 0
start_broker "$T_DIR/other.toml" 1
wait_for "rank 0 is up" 10 env BANYAN_URI="$(uri_of 0)" banyan ping 0
wait_for "rank 0 refuses the broker with another certificate" 10 \
    grep -q "refused connection on .*CURVE handshake failed" "$T_DIR/rank-0.log"
check_output "the broker with another certificate did not join" "^offline: 1 \(1\)$" \
    env BANYAN_URI="$(uri_of 0)" banyan overlay status -s
check_output "rank 0 logged the refused connection" "refused connection on .*CURVE handshake failed" \
    cat "$T_DIR/rank-0.log"
check_output "the refused broker logged why" "refused us: CURVE handshake failed" cat "$T_DIR/rank-1.log"

pubkey=$(sed -n 's/^public-key = "\(.*\)"$/\1/p' "$T_DIR/good.cert")
check_output "a client with the cluster's public key but its own key pair is refused" "^refused$" \
    banyan-test-client intrude "tcp://127.0.0.1:${port}" "$pubkey" 1
check_output "the ZAP refusal names the stranger's key" "refused connection from .*public key .* is not the cluster" \
    cat "$T_DIR/rank-0.log"

pkill -f -- "--rundir $T_DIR/rank-1( |$)"
start_broker "$T_DIR/good.toml" 1
wait_for "with the right certificate rank 1 joins" 10 \
    sh -c "BANYAN_URI=$(uri_of 0) banyan overlay status -s | grep -q '^online: 0-1 (2)$'"
check "banyan shutdown stops the instance" env BANYAN_URI="$(uri_of 0)" banyan shutdown
no_brokers_left "both brokers exited" "$T_DIR"

cp "$T_DIR/good.cert" "$T_DIR/open.cert"
chmod 644 "$T_DIR/open.cert"
write_config "$T_DIR/open.toml" 2 "$port" "$T_DIR/open.cert"
check_fails "a certificate others can read is refused" "open.cert: certificate is readable by others \(mode 644\)" \
    banyan-broker --config "$T_DIR/open.toml" --rank 0 --rundir "$T_DIR/x"
grep -v curve_cert "$T_DIR/good.toml" >"$T_DIR/nocert.toml"
check_fails "tcp without a certificate is refused" "bootstrap.curve_cert is required for tcp://" \
    banyan-broker --config "$T_DIR/nocert.toml" --rank 0 --rundir "$T_DIR/x"
printf '[tbon]\nfanuot = 2\n' >"$T_DIR/typo.toml"
check_fails "a misspelt key is named, with the key meant" "typo.toml: tbon.fanuot: unknown key, did you mean 'fanout'\?" \
    banyan-broker --config "$T_DIR/typo.toml" --rundir "$T_DIR/x"
# Tables Banyan does not have (Slurm's words among them) are errors too,
# in a file and with -S, never silently ignored.
printf '[partitions.debug]\nnodes = "n[1-2]"\n' >"$T_DIR/slurmish.toml"
check_fails "an unknown table in a config file is named" "slurmish.toml: partitions: unknown table" \
    banyan-broker --config "$T_DIR/slurmish.toml" --rundir "$T_DIR/x"
check_fails "an unknown top-level key with -S is named" "foo: unknown table" \
    banyan start --test-size=1 -S foo=1 true
check_fails "so is one in a table Banyan lacks" "qos: unknown table" \
    banyan start --test-size=1 -S qos.high.priority=1 true
printf '[bootstrap]\nhosts = "node[0-3]"\n' >"$T_DIR/hosts.toml"
check_fails "a host not in the host list is named" "host 'elsewhere' is not in bootstrap.hosts \(node\[0-3\]\)" \
    banyan-broker --config "$T_DIR/hosts.toml" --hostname elsewhere --rundir "$T_DIR/x"
