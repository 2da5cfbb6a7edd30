#!/bin/bash
# Jobs in containers (--container, doc/spec/shell.md §9): tasks run as
# their user inside a Debian image, with the host's network and the job's
# directories, cores and GPUs; MPI across 4 brokers with the image's own
# Open MPI and MPICH, a container per node or per task; images as an OCI
# layout, an OCI archive and a podman image, unpacked once into a cache
# that evicts at its bound; bad input refused in one line; and on a
# multi-user instance, alice's container runs as alice and cannot read
# bob's files.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
. "$HERE/job-image.sh"
need_cores 2 "MPI programs run two ranks on a node"
MPI_DIR=${BANYAN_MPI_DIR:?the MPI test programs (BANYAN_MPI_DIR)}
# Every broker is on this host: ranks talk over loopback (see 3002).
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo UCX_NET_DEVICES=lo
export OMPI_MCA_mpi_yield_when_idle=1

# A second image, without MPI: Debian's minimal root alone.
BARE_IMAGE=localhost/banyan-job-bare:$(stat -c %Y "$BANYAN_BUILD_DIR/debian12-minbase.tar")
podman image exists "$BARE_IMAGE" ||
    podman import --change 'CMD ["/bin/sh"]' "$BANYAN_BUILD_DIR/debian12-minbase.tar" "$BARE_IMAGE" >/dev/null
BARE_LAYOUT=$T_DIR/bare-layout
podman save -q --format oci-dir -o "$BARE_LAYOUT" "$BARE_IMAGE"

# Both images fit in the cache alone, not together (each ~200-230 MB).
CACHE=$T_DIR/cache
start_cluster 4 "[exec]
container-cache = \"$CACHE-{uid}\"
container-cache-size = \"300M\""
mkdir -p "$T_DIR/work"
cd "$T_DIR/work" || exit 1
L=$JOB_LAYOUT

# Who and where the tasks are.
out=$(banyan run --container="$L" sh -c 'echo "$(id -u) $(id -g) $(hostname) $(pwd)"; cat /etc/banyan-job-image; echo from-the-container >written.txt' 2>&1)
echo "$out" | sed 's/^/    | /'
check "the task ran as its user and group, on this host, in the job's cwd" \
    test "$(echo "$out" | head -1)" = "$(id -u) $(id -g) $(hostname) $T_DIR/work"
check "... inside the image (a file only the image has)" grep -q "banyan's job image" <<<"$out"
check_output "what it wrote in the cwd is there outside" "^from-the-container$" cat written.txt
check_fails "the image's root is read-only" "Read-only file system" banyan run --container="$L" touch /usr/x
check_output "HOME is bound at its path" "^$HOME\$" banyan run --container="$L" sh -c 'cd "$HOME" && pwd'
check_output "the job's environment comes in" "^here$" env ON_THE_HOST=here banyan run --container="$L" printenv ON_THE_HOST
check_output "the host's network: its interfaces are the task's" "^$(ls /sys/class/net | sort | tr '\n' ' ')\$" \
    banyan run --container="$L" sh -c 'ls /sys/class/net | sort | tr "\n" " "'
mkdir -p "$T_DIR/data" && echo shared-data >"$T_DIR/data/in.txt"
check_output "--container-mount binds a directory where asked" "^shared-data$" \
    banyan run --container="$L" --container-mount="$T_DIR/data:/data:ro" cat /data/in.txt
check_fails "... read-only with :ro" "Read-only file system" \
    banyan run --container="$L" --container-mount="$T_DIR/data:/data:ro" touch /data/x

# Slurm's and Pyxis' options, through banyan-slurm's srun.
check_output "srun --container-image with --container-mounts (Pyxis')" "^shared-data$" \
    "$BANYAN_BUILD_DIR/bin/slurm/srun" --container-image="$L" --container-mounts="$T_DIR/data:/data:ro" cat /data/in.txt
printf '#!/bin/sh\n#SBATCH --container-image=%s\ncat /etc/banyan-job-image\n' "$L" >"$T_DIR/job.sh"
printf '#!/bin/sh\ntrue\n' >"$T_DIR/plain.sh"
check_fails "sbatch refuses #SBATCH --container-image (the script runs on the host)" \
    "job.sh:2: #SBATCH --container-image=.*: the batch script runs on the host" "$BANYAN_BUILD_DIR/bin/slurm/sbatch" "$T_DIR/job.sh"
check_fails "banyan batch refuses --container for the same reason" "^banyan batch: --container: the instance of a batch job" \
    banyan batch --container="$L" "$T_DIR/plain.sh"

# Cores: the tasks' binding is the same inside as outside.
affinity='echo "$BANYAN_TASK_RANK $(grep Cpus_allowed_list /proc/self/status | cut -f2)"'
outside=$(banyan run -N1 -n2 -o cpu-affinity=per-task sh -c "$affinity" | sort)
check_output "tasks are bound inside as outside (-o cpu-affinity=per-task: $(echo $outside))" "^$(echo $outside)\$" \
    sh -c "banyan run -N1 -n2 -o cpu-affinity=per-task --container='$L' sh -c '$affinity' | sort | tr '\n' ' ' | sed 's/ \$//'"

# One container per node, or one per task.
# Each task writes down its mount namespace, then waits for all 4 to have
# (a namespace's number is reused once it is gone).
cat >"$T_DIR/mnt.sh" <<'SH'
echo "$BANYAN_TASK_RANK $(readlink /proc/self/ns/mnt)" >>"$1"
while [ "$(wc -l <"$1")" -lt 4 ]; do sleep 0.05; done
SH
: >"$T_DIR/per-node.txt" >"$T_DIR/per-task.txt"
banyan run -N2 -n4 --container="$L" sh "$T_DIR/mnt.sh" "$T_DIR/per-node.txt"
banyan run -N2 -n4 -o container-per-task --container="$L" sh "$T_DIR/mnt.sh" "$T_DIR/per-task.txt"
check_output "a container per node: 4 tasks on 2 brokers, 2 mount namespaces of 2 tasks each" "^2 2$" \
    sh -c "cut -d' ' -f2 '$T_DIR/per-node.txt' | sort | uniq -c | awk '{print \$1}' | tr '\n' ' ' | sed 's/ \$//'"
check_output "-o container-per-task: 4 tasks, 4 mount namespaces" "^4$" \
    sh -c "cut -d' ' -f2 '$T_DIR/per-task.txt' | sort -u | wc -l"
check "... none of them the host's" sh -c "! grep -q '$(readlink /proc/self/ns/mnt)' '$T_DIR/per-node.txt' '$T_DIR/per-task.txt'"

# MPI across the 4 brokers, with the image's libraries.
for mpi in mpich mpi; do
    name=$([ $mpi = mpi ] && echo "Open MPI (PMIx)" || echo "MPICH (PMI-1)")
    check_output "$name ring, 8 ranks on 4 brokers, a container per node" "ring: size 8 token 56 expected 56" \
        banyan run -N4 -n8 --container="$L" --container-mount="$MPI_DIR:/mpi:ro" /mpi/$mpi-ring
    check_output "$name allreduce, 8 ranks, a container per task" "allreduce: size 8 checksum [0-9]+ errors 0" \
        banyan run -N4 -n8 -o container-per-task --container="$L" --container-mount="$MPI_DIR:/mpi:ro" /mpi/$mpi-allreduce
done
check_output "MPICH hello from every rank" "^8$" \
    sh -c "banyan run -N4 -n8 --container='$L' --container-mount='$MPI_DIR:/mpi:ro' /mpi/mpich-hello | grep -c 'of 8 on'"

# Image kinds, and the cache.
entry_of() { ls -d "$CACHE-$(id -u)"/sha256-* 2>/dev/null | grep -v '\.lock$' | head -1; }
first=$(entry_of)
check "the layout was unpacked once into the cache (one entry)" test -n "$first" -a -d "$first/rootfs"
inode=$(stat -c %i "$first/rootfs")
banyan run --container="$L" true
check "a later job reuses the entry (not unpacked again)" test "$(stat -c %i "$(entry_of)/rootfs")" = "$inode"
check_output "an OCI archive runs (the same image: the same entry)" "^banyan's job image$" \
    banyan run --container="$JOB_ARCHIVE" cat /etc/banyan-job-image
check "... the same entry" test "$(stat -c %i "$(entry_of)/rootfs")" = "$inode"
check_output "the MPI library is the image's: the bare image cannot load it" "libmpich.so.12" \
    banyan run --container="$BARE_LAYOUT" --container-mount="$MPI_DIR:/mpi:ro" /mpi/mpich-hello
check "the cache's bound (300M) evicted the MPI image for the bare one" test ! -e "$first"
check "... and kept the one just made" test -d "$(ls -d "$CACHE-$(id -u)"/sha256-* | grep -v '\.lock$' | head -1)/rootfs"
check_output "an image of podman's storage, by name" "^banyan's job image$" \
    banyan run --container="$JOB_IMAGE" cat /etc/banyan-job-image
check "... cached under podman's image id" test -d "$CACHE-$(id -u)/podman-$(podman image inspect --format '{{.Id}}' "$JOB_IMAGE")/rootfs"
check "no half-made entry is left" sh -c "! ls -d '$CACHE-$(id -u)'/*.part '$CACHE-$(id -u)'/scratch.* 2>/dev/null | grep -q ."
check_output "the cache is the user's alone" "^700 $(id -un)\$" stat -c '%a %U' "$CACHE-$(id -u)"

# GPUs: only the job's device files. (Stand-ins for NVIDIA's where this
# machine has none: character files of the driver's major number.)
if [ ! -e /dev/nvidia0 ] && [ ! -e /dev/nvidiactl ]; then
    mknod -m 666 /dev/nvidia0 c 195 0 && mknod -m 666 /dev/nvidia1 c 195 1 && mknod -m 666 /dev/nvidiactl c 195 255
    CLEANUP+=("rm -f /dev/nvidia0 /dev/nvidia1 /dev/nvidiactl")
    cp "$BANYAN_SOURCE_DIR/t/data/hwloc/two-gpu-node.xml" "$T_DIR/gpus.xml"
    gpus='echo "$CUDA_VISIBLE_DEVICES:" $(ls /dev | grep nvidia)'
    check_output "a job with 1 of 2 GPUs sees its own GPU's device file and the driver's, not the other" \
        "^([01]): nvidia\\1 nvidiactl\$" \
        banyan start -S "resource.hwloc_xml=$T_DIR/gpus.xml" --test-size=1 banyan run -g1 --container="$L" sh -c "$gpus"
    check_output "a job with both sees both" "^0,1: nvidia0 nvidia1 nvidiactl\$" \
        banyan start -S "resource.hwloc_xml=$T_DIR/gpus.xml" --test-size=1 banyan run -g2 --container="$L" sh -c "$gpus"
    check_output "a job without GPUs sees none" "^:\$" \
        banyan start -S "resource.hwloc_xml=$T_DIR/gpus.xml" --test-size=1 banyan run --container="$L" sh -c "$gpus"
fi

# Bad input: one line at submit where it can be known there, else the
# job's exception naming the node; never a task outside the container.
check_fails "a missing image is refused at submit" "^banyan run: --container=$T_DIR/nothing: No such file or directory\$" \
    banyan run --container="$T_DIR/nothing" true
mkdir -p "$T_DIR/not-an-image"
check_fails "a directory that is not a layout is refused at submit" "not an OCI image layout \(no index.json\)" \
    banyan run --container="$T_DIR/not-an-image" true
check_fails "a mount of a missing path is refused at submit" "^banyan run: --container-mount=$T_DIR/gone:/x: $T_DIR/gone: No such file or directory\$" \
    banyan run --container="$L" --container-mount="$T_DIR/gone:/x" true
check_fails "a mount without a destination is refused" "expected SOURCE:DESTINATION\[:ro\]" \
    banyan run --container="$L" --container-mount="$T_DIR/data" true
check_fails "--container-mount without --container is refused" "only with --container" \
    banyan run --container-mount="$T_DIR/data:/data" true
check_fails "an image name podman does not have: the job's exception names the node" \
    "exec: container on $(hostname): image no-such-image: no such file, and not in the containers storage" \
    banyan run --container=no-such-image true
cp -r "$L" "$T_DIR/corrupt"
layer=$(jq -r '.layers[0].digest' "$T_DIR/corrupt/blobs/sha256/$(jq -r '.manifests[0].digest' "$T_DIR/corrupt/index.json" | cut -d: -f2)" | cut -d: -f2)
printf 'not what was there' | dd of="$T_DIR/corrupt/blobs/sha256/$layer" bs=1 seek=4096 conv=notrunc 2>/dev/null
check_fails "a corrupt layer: the job fails naming it, and no task runs" \
    "container on $(hostname): image $T_DIR/corrupt: layer sha256:$layer does not match its digest" \
    banyan run --container="$T_DIR/corrupt" touch "$T_DIR/ran-anyway"
check "... (the task did not run outside instead)" test ! -e "$T_DIR/ran-anyway"
# An image for another architecture: its config says arm64 (and the
# digests are made again, so only that is wrong).
cp -r "$L" "$T_DIR/arm64"
blobs=$T_DIR/arm64/blobs/sha256
manifest=$(jq -r '.manifests[0].digest' "$T_DIR/arm64/index.json" | cut -d: -f2)
config=$(jq -r '.config.digest' "$blobs/$manifest" | cut -d: -f2)
jq -c '.architecture = "arm64"' "$blobs/$config" >"$T_DIR/config.json"
new_config=$(sha256sum "$T_DIR/config.json" | cut -c1-64)
mv "$T_DIR/config.json" "$blobs/$new_config"
jq -c --arg d "sha256:$new_config" --argjson s "$(stat -c %s "$blobs/$new_config")" \
    '.config.digest = $d | .config.size = $s' "$blobs/$manifest" >"$T_DIR/manifest.json"
new_manifest=$(sha256sum "$T_DIR/manifest.json" | cut -c1-64)
mv "$T_DIR/manifest.json" "$blobs/$new_manifest"
jq -c --arg d "sha256:$new_manifest" --argjson s "$(stat -c %s "$blobs/$new_manifest")" \
    '.manifests[0].digest = $d | .manifests[0].size = $s' "$T_DIR/arm64/index.json" >"$T_DIR/index.json"
mv "$T_DIR/index.json" "$T_DIR/arm64/index.json"
check_fails "an image for another architecture: the job fails saying both" \
    "image $T_DIR/arm64: it is built for linux/arm64; this node is amd64/linux" \
    banyan run --container="$T_DIR/arm64" true
check_fails "a command the image lacks: the job fails saying so" \
    "container on $(hostname): no-such-command: not found in the container" \
    banyan run --container="$L" no-such-command
# A cancel while the image unpacks (the cache emptied first: nothing of it
# is in use): no task starts, and nothing of the job is left.
rm -rf "$CACHE-$(id -u)"/sha256-* "$CACHE-$(id -u)"/podman-*
job=$(banyan submit --container="$BARE_LAYOUT" touch "$T_DIR/ran-after-cancel")
state() { banyan jobs -a --no-header -o '{id} {st}' | grep "^$1 " | cut -d' ' -f2; }
export -f state
wait_for "a job starts: its holder unpacks the image" 20 sh -c "pgrep -f 'banyan-shell --containe[r]' >/dev/null"
banyan cancel "$job"
wait_for "the job ends when canceled meanwhile" 30 sh -c "[ \"\$(state $job)\" != R ]"
check "... no task ran" test ! -e "$T_DIR/ran-after-cancel"
wait_for "... nothing of it is left running (holder, tar)" 10 sh -c "! pgrep -f 'banyan-shell --containe[r]|ta[r] -xf $BARE_LAYOUT'"
banyan run --container="$BARE_LAYOUT" true
check "a later unpack removes what the canceled one left (part, scratch)" \
    sh -c "! ls -d '$CACHE-$(id -u)'/*.part '$CACHE-$(id -u)'/scratch.* '$CACHE-$(id -u)'/*.evicted.* 2>/dev/null | grep -q ."
check_output "a job whose cwd is / still runs in its image (/ is never bound)" "^banyan's job image$" \
    banyan run --cwd=/ --container="$L" cat /etc/banyan-job-image
check_fails "a cache path without {uid} is refused when the broker starts" \
    "exec.container-cache: \"/var/tmp/shared\": expected an absolute path with \{uid\}" \
    banyan start --test-size=1 -S 'exec.container-cache="/var/tmp/shared"' true
check_output "every broker is still up" "^online: 0-3 \(4\)$" banyan overlay status -s
banyan shutdown >/dev/null 2>&1
no_brokers_left "the instance stopped" "$T_DIR/c.toml"

# A multi-user instance: alice's container runs as alice.
rm -rf "$T_DIR/cert" "$T_DIR"/rank-*
. "$HERE/multi_user.sh"
install -d -m 1777 "$T_DIR/caches"  # as /var/tmp: each user makes their own in it
MULTI_USER_EXEC="container-cache = \"$T_DIR/caches/{uid}\"" start_multi_user
install -d -o "$BOB" -m 0700 "$T_DIR/home/bob" && echo bobs-secret >"$T_DIR/home/bob/secret" &&
    chown "$BOB" "$T_DIR/home/bob/secret" && chmod 600 "$T_DIR/home/bob/secret"
cd "$T_DIR/home/alice" || exit 1
out=$(as "$ALICE" banyan run -N2 -n2 --container="$L" sh -c 'echo "$(id -un) $(id -u)"; echo hers >>mine.txt' 2>&1)
echo "$out" | sed 's/^/    | /'
check "alice's 2 tasks on 2 brokers ran as alice inside" test "$(echo "$out" | grep -c "^$ALICE $(id -u "$ALICE")\$")" = 2
check_output "what she wrote in her cwd is hers" "^$ALICE$" stat -c %U "$T_DIR/home/alice/mine.txt"
check_fails "her container cannot read bob's files" "Permission denied" \
    as "$ALICE" banyan run --container="$L" cat "$T_DIR/home/bob/secret"
check_fails "nor may she bind his home into it (refused at submit)" "^banyan run: --container-mount=.*: Permission denied$" \
    as "$ALICE" banyan run --container="$L" --container-mount="$T_DIR/home/bob:/bob" true
check_output "her image cache is hers alone" "^700 $ALICE\$" stat -c '%a %U' "$T_DIR/caches/$(id -u "$ALICE")"
