#!/bin/bash
# The .deb, as an admin meets it: installed with apt into a fresh Debian 12
# root (debootstrap), its dependencies from shlibdeps; there it runs a
# 2-broker instance and has its man pages; purged, it leaves nothing.
. "$(dirname "$0")/lib.sh"

need_root "debootstrap and chroot"
need_tools debootstrap

deb=$("$BANYAN_SOURCE_DIR/scripts/package" "$BANYAN_BUILD_DIR" 2>"$T_DIR/package.log")
check "scripts/package prints the .deb it made" test -f "$deb"
[ -f "$deb" ] || { cat "$T_DIR/package.log"; exit 1; }
check_output "its dependencies come from shlibdeps" "libmunge2.*libzmq5" \
    sh -c "dpkg-deb -f '$deb' Depends | tr -d '\n'"
check_output "the helper is in it, its mode left to postinst" "libexec/banyan/banyan-imp" dpkg-deb -c "$deb"

# A fresh Debian 12 (debootstrap, cached in the build tree: most of this
# test's time when it runs).
R=$T_DIR/root
"$BANYAN_SOURCE_DIR/scripts/debian-root" make "$R" "$BANYAN_BUILD_DIR/debian12-minbase.tar" ||
    { echo "no Debian root"; exit 1; }
cp "$deb" "$R/tmp/banyan.deb"
in_root() { "$BANYAN_SOURCE_DIR/scripts/debian-root" run "$R" "$1"; }
in_root "apt-get update -q && apt-get install -y -q /tmp/banyan.deb" >"$T_DIR/apt.log" 2>&1
check "apt installs the .deb and its dependencies" test $? = 0 || tail -20 "$T_DIR/apt.log"
check "postinst made the system user banyan" in_root "id banyan"
check_output "banyan-imp is setuid root, executable by the group banyan only" "^root:banyan 4750$" \
    in_root "stat -c '%U:%G %a' /usr/libexec/banyan/banyan-imp"
check_output "a 2-broker instance runs a job on both" "^2$" \
    in_root "banyan start --test-size=2 banyan run -N2 hostname | wc -l"
check_output "man finds banyan-submit" "^/usr/share/man/man1/banyan-submit.1.gz$" in_root "man -w banyan-submit"
check_output "the config is in /etc/banyan" "imp = " in_root "cat /etc/banyan/banyan.toml"
check_output "the Snakemake profile is installed" "^cluster: \"banyan batch" \
    in_root "test -x /usr/share/banyan/snakemake/status && cat /usr/share/banyan/snakemake/config.yaml"

# systemd-tmpfiles ages /var/tmp (Debian: 30 days); the container image
# caches there are exempt: an old image's files stay, others go.
mkdir -p "$R/etc/tmpfiles.d" "$R/var/tmp/banyan-images-1000/sha256-a/rootfs/bin" "$R/var/tmp/other"
# (aged by mtime: a test cannot set a file's ctime back)
printf 'q /var/tmp 1777 root root m:30d\n' >"$R/etc/tmpfiles.d/age.conf"
touch "$R/var/tmp/banyan-images-1000/sha256-a/rootfs/bin/app" "$R/var/tmp/other/file"
find "$R/var/tmp/banyan-images-1000" "$R/var/tmp/other" -exec touch -a -m -d '90 days ago' {} +
systemd-tmpfiles --clean --root="$R" >"$T_DIR/tmpfiles.log" 2>&1
check "systemd-tmpfiles ages other old files in /var/tmp" test ! -e "$R/var/tmp/other/file"
check "... not an image cache's (the package's tmpfiles.d rule)" test -e "$R/var/tmp/banyan-images-1000/sha256-a/rootfs/bin/app"

# banyan-slurm, Slurm's commands: beside banyan, never beside Slurm's.
slurm_deb=$("$BANYAN_SOURCE_DIR/scripts/package-slurm" "$BANYAN_BUILD_DIR" 2>>"$T_DIR/package.log")
check "scripts/package-slurm prints the .deb it made" test -f "$slurm_deb"
check_output "banyan-slurm needs banyan of its version and conflicts with slurm-client" \
    "^banyan \(= [0-9.]+\) slurm-client, slurm-wlm-torque$" \
    sh -c "echo \$(dpkg-deb -f '$slurm_deb' Depends) \$(dpkg-deb -f '$slurm_deb' Conflicts)"
cp "$slurm_deb" "$R/tmp/banyan-slurm.deb"
in_root "apt-get install -y -q /tmp/banyan-slurm.deb" >>"$T_DIR/apt.log" 2>&1
check "apt installs banyan-slurm" test $? = 0 || tail -20 "$T_DIR/apt.log"
check_output "its sbatch submits and squeue lists, in a 1-broker instance" "^Submitted batch job [0-9]+ (R|PD)$" \
    in_root "banyan start --test-size=1 sh -c 'echo \$(sbatch --wrap=\"sleep 2\") \$(squeue -h -o %t)'"
check_output "man finds banyan-slurm(7)" "^/usr/share/man/man7/banyan-slurm.7.gz$" in_root "man -w banyan-slurm"
in_root "dpkg -L banyan-slurm" >"$T_DIR/slurm-files"
in_root "apt-get purge -y -q banyan-slurm" >"$T_DIR/purge.log" 2>&1
check "apt purges banyan-slurm" test $? = 0
check "purge leaves no file of banyan-slurm" \
    sh -c "! while read -r f; do [ -e '$R'\"\$f\" ] && [ ! -d '$R'\"\$f\" ] && echo \"\$f\"; done <'$T_DIR/slurm-files' | grep ."

in_root "dpkg -L banyan" >"$T_DIR/files"
in_root "apt-get purge -y -q banyan" >"$T_DIR/purge.log" 2>&1
check "apt purges it" test $? = 0
check "purge leaves no file of the package" sh -c "! while read -r f; do [ -f '$R'\"\$f\" ] && echo \"\$f\"; done <'$T_DIR/files' | grep ."
for d in /etc/banyan /var/lib/banyan /var/lib/banyan-imp; do
    check "purge leaves no $d" test ! -e "$R$d"
done
check "purge removes the user and group banyan" in_root "! getent passwd banyan && ! getent group banyan"
