# Sourced by the tests of jobs in containers (after lib.sh): a Debian 12
# image made from scripts/debian-root with the MPI libraries of Debian
# (Open MPI and MPICH, the ones the programs in $BANYAN_MPI_DIR link
# against), in podman's storage as $JOB_IMAGE, and as an OCI layout
# directory ($JOB_LAYOUT) and an OCI archive ($JOB_ARCHIVE) in $T_DIR.
# The root is made once per build directory (its tarball is kept there).

need_root "debootstrap, podman"
need_tools podman debootstrap tar
job_root_tar=$BANYAN_BUILD_DIR/job-image-mpi.tar
if [ ! -s "$job_root_tar" ]; then
    root=$T_DIR/job-root
    "$BANYAN_SOURCE_DIR/scripts/debian-root" make "$root" "$BANYAN_BUILD_DIR/debian12-minbase.tar" ||
        { echo "scripts/debian-root failed"; exit 1; }
    if ! "$BANYAN_SOURCE_DIR/scripts/debian-root" run "$root" \
        "apt-get update -q && apt-get install -y -q --no-install-recommends libopenmpi3 libmpich12 && apt-get clean" \
        >"$T_DIR/job-root.log" 2>&1; then
        tail -20 "$T_DIR/job-root.log"
        echo "apt could not install the MPI libraries in the job image"
        exit 1
    fi
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/etc/resolv.conf
    echo "banyan's job image" >"$root/etc/banyan-job-image"  # found only inside
    tar -C "$root" -cf "$job_root_tar.part" . && mv "$job_root_tar.part" "$job_root_tar"
    rm -rf "$root"
fi
JOB_IMAGE=localhost/banyan-job-mpi:$(stat -c %Y "$job_root_tar")
podman image exists "$JOB_IMAGE" || podman import --change 'CMD ["/bin/sh"]' "$job_root_tar" "$JOB_IMAGE" >/dev/null
JOB_LAYOUT=$T_DIR/job-layout
JOB_ARCHIVE=$T_DIR/job-image.tar
podman save -q --format oci-dir -o "$JOB_LAYOUT" "$JOB_IMAGE"
podman save -q --format oci-archive -o "$JOB_ARCHIVE" "$JOB_IMAGE"
chmod -R a+rX "$JOB_LAYOUT" "$JOB_ARCHIVE"
