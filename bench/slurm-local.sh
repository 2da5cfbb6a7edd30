# Sourced by the Slurm benchmarks: start_slurm starts munged, slurmctld and
# one slurmd for this machine from scratch in a temporary directory (see
# ../shared/peers/SLURM.md), with SLURM_CONF exported; everything stops and
# the directory goes when the calling script exits. Needs root.
start_slurm() {
    dir=$(mktemp -d /tmp/slurm-bench-XXXXXX)
    chown slurm: "$dir" 2>/dev/null || true
    host=$(hostname -s)
    cpus=$(nproc)
    pids=()
    stop() {
        for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
        sleep 1
        rm -rf "$dir"
    }
    trap stop EXIT
    mkdir -p "$dir/state" "$dir/spool" "$dir/tmp" /run/munge
    chown -R slurm: "$dir"
    chown munge: /run/munge
    pgrep -x munged >/dev/null || { su -s /bin/sh munge -c '/usr/sbin/munged -F' >/dev/null 2>&1 & pids+=($!); }
    cat >"$dir/slurm.conf" <<CONF
ClusterName=bench
SlurmctldHost=$host
SlurmUser=slurm
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
TmpFS=$dir/tmp
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,bf_interval=1,bf_continue
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MaxJobCount=200000
MaxArraySize=100001
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
    export SLURM_CONF=$dir/slurm.conf
    sleep 1
    slurmctld -D -f "$SLURM_CONF" >/dev/null 2>&1 & pids+=($!)
    for _ in $(seq 100); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.2; done
    slurmd -D -f "$SLURM_CONF" >/dev/null 2>&1 & pids+=($!)
    for _ in $(seq 100); do sinfo -h -o %t 2>/dev/null | grep -q idle && break; sleep 0.2; done
}
