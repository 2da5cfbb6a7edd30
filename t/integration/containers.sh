# Sourced by the container tests (after lib.sh): the image scripts/image
# makes of this build (with Open MPI's libraries for the MPI programs), and
# brokers in podman containers. Skips (77) where podman cannot run here.

need_root "debootstrap, podman"
need_tools podman runc debootstrap
# runc sets every limit podman asks for, and may not raise one above what
# it has itself: ask for modest ones (its defaults are refused here).
min() { echo $(($1 < $2 ? $1 : $2)); }
nofile=$(min "$(ulimit -Hn | sed 's/unlimited/65536/')" 65536)
nproc=$(min "$(ulimit -Hu | sed 's/unlimited/4096/')" 4096)
PODMAN_RUN=(podman run --runtime runc --ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
# The image of this build, made once per .deb (podman keeps it).
deb=$("$BANYAN_SOURCE_DIR/scripts/package" "$BANYAN_BUILD_DIR" 2>"$T_DIR/package.log") ||
    { cat "$T_DIR/package.log"; exit 1; }
IMAGE=localhost/banyan-test:$(dpkg-deb --fsys-tarfile "$deb" | tar -xO | sha256sum | cut -c1-12)
if ! podman image exists "$IMAGE"; then
    "$BANYAN_SOURCE_DIR/scripts/image" --build-dir "$BANYAN_BUILD_DIR" --tag "$IMAGE" --add libopenmpi3 \
        >"$T_DIR/image.log" 2>&1 || { tail -20 "$T_DIR/image.log"; echo "scripts/image failed"; exit 1; }
fi
if ! "${PODMAN_RUN[@]}" --rm --network none "$IMAGE" true >"$T_DIR/probe.log" 2>&1; then
    echo "podman cannot run a container here: $(tail -1 "$T_DIR/probe.log")"
    exit "$SKIP_CODE"
fi

# One network with DNS names per test; containers named bnyt-N.
NET=bnyt-net-$$
podman network create "$NET" >/dev/null
CLEANUP+=("podman rm -f -t 0 \$(podman ps -aq --filter name=^bnyt-) >/dev/null 2>&1; podman network rm -f $NET >/dev/null 2>&1")
# Cores per container: 2, or the host's count when it has fewer.
CPUS=$(($(nproc) < 2 ? $(nproc) : 2))
