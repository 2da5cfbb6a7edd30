#!/bin/bash
# The Kubernetes manifests (etc/k8s): rendered with kustomize and checked
# offline against the API's schemas, so that a broken field fails here;
# then the pods they describe run under podman kube play and run an MPI
# job, as they would in a cluster.
. "$(dirname "$0")/lib.sh"

tools=$BANYAN_SOURCE_DIR/t/k8s
need_tools kubectl node
[ -d "$tools/node_modules" ] || { echo "needs t/k8s/node_modules (scripts/install-deps runs npm ci)"; exit "$SKIP_CODE"; }
render() { kubectl kustomize "$1" 2>"$T_DIR/kustomize.log"; }
validate() { node "$tools/check-manifests.mjs" "$@"; }

# A copy of the manifests, with the certificate an admin makes once.
K=$T_DIR/k8s
cp -r "$BANYAN_SOURCE_DIR/etc/k8s" "$K"
cp -r "$tools/podman" "$K/podman"
banyan keygen "$K/overlays/example/curve.cert" >/dev/null
banyan keygen "$K/podman/curve.cert" >/dev/null

check "the example overlay renders" sh -c "kubectl kustomize '$K/overlays/example' >'$T_DIR/example.yaml'"
check_output "and passes the API's schemas" "^5 objects: valid$" validate "$T_DIR/example.yaml"
check "the base renders" sh -c "kubectl kustomize '$K/base' >'$T_DIR/base.yaml'"
check_output "and passes them too" "^4 objects: valid$" validate "$T_DIR/base.yaml"
y=$T_DIR/example.yaml
check_output "an Indexed Job of 8 pods" "completionMode: Indexed" cat "$y"
check_output "parallelism = completions = 8" "^8 8$" \
    sh -c "echo \$(grep -E '^  (completions|parallelism):' '$y' | awk '{print \$2}')"
check_output "the config lists 8 hosts" 'hosts = "banyan-\[0-7\]"' cat "$y"
check_output "a headless Service that publishes pods before they are ready" "publishNotReadyAddresses: true" cat "$y"
check_output "the certificate mounted 0400" "defaultMode: 256" cat "$y"
check_output "/dev/shm in memory for MPI" "medium: Memory" cat "$y"
check_output "rank 0's state on a claim" "claimName: banyan-state" cat "$y"
check_output "ready once every expected rank is up" "- ready" cat "$y"
check_output "the overlay's image" "image: registry.example.com/hpc/banyan:0.1.0" cat "$y"
sed 's/^  parallelism: 8/  parallelizm: 8/' "$y" >"$T_DIR/typo.yaml"
check_fails "a misspelt field fails, named" "Job banyan: .*'\"parallelizm\"' does not exist in type 'JobSpec'" \
    validate "$T_DIR/typo.yaml"
sed 's/completionMode: Indexed/completionMode: Indexd/' "$y" >"$T_DIR/enum.yaml"
check_fails "a value the API does not allow fails, named" "Job banyan: /spec/completionMode must be equal to one of" \
    validate "$T_DIR/enum.yaml"
sed 's/cpu: "16"/cpu: lots/' "$y" >"$T_DIR/quantity.yaml"
check_fails "a wrong type fails, named" "Job banyan: " validate "$T_DIR/quantity.yaml"

# The same manifests, run: podman kube play of the pods the Job makes.
. "$(dirname "$0")/containers.sh"
# The test's MPI programs, mounted from this build (an overlay patch, as a
# site would add its application's volume).
cat >"$K/podman/mpi.yaml" <<YAML
apiVersion: batch/v1
kind: Job
metadata:
  name: banyan
spec:
  template:
    spec:
      containers:
        - name: broker
          volumeMounts:
            - name: mpi
              mountPath: /mpi
              readOnly: true
      volumes:
        - name: mpi
          hostPath:
            path: $BANYAN_MPI_DIR
YAML
printf 'patchesStrategicMerge:\n  - mpi.yaml\n' >>"$K/podman/kustomization.yaml"
render "$K/podman" >"$T_DIR/podman.yaml" || { cat "$T_DIR/kustomize.log"; exit 1; }
node "$tools/job-to-pods.mjs" "$T_DIR/podman.yaml" "$IMAGE" "$T_DIR/secrets" >"$T_DIR/pods.yaml"
check_output "4 pods from the Job" "^4$" grep -c "^kind: Pod" "$T_DIR/pods.yaml"
# kube play takes no --ulimit: the same modest limits through containers.conf.
printf '[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=%s:%s"]\n[engine]\nruntime = "runc"\n' \
    "$nofile" "$nofile" "$nproc" "$nproc" >"$T_DIR/containers.conf"
export CONTAINERS_CONF=$T_DIR/containers.conf
CLEANUP+=("podman kube down '$T_DIR/pods.yaml' >/dev/null 2>&1; podman volume rm -f banyan-state >/dev/null 2>&1")
podman volume rm -f banyan-state >/dev/null 2>&1
check "podman kube play starts them" sh -c "podman kube play --network '$NET' '$T_DIR/pods.yaml' >'$T_DIR/play.log' 2>&1" ||
    tail -5 "$T_DIR/play.log"
at0() { podman exec banyan-0-broker "$@"; }
export -f at0
wait_for "the 4 pods form the instance" 30 at0 banyan ready
check_output "each pod's limits are its node: $CPUS cores, 2 GiB" "this node: $CPUS cores, 0 gpus, 2048 MiB" \
    sh -c "podman logs banyan-3-broker 2>&1"
check_output "an MPI job runs across the pods" "^$((4 * CPUS))$" \
    sh -c "podman exec banyan-0-broker banyan run -N4 -n$((4 * CPUS)) /mpi/mpi-hello | grep -c '^hello from rank'"
check_output "in every pod" "^4$" sh -c "podman exec banyan-0-broker banyan run -N4 hostname | sort -u | wc -l"
