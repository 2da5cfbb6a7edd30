#!/bin/bash
# Workflow tools that speak Slurm (doc/spec/slurm.md §7): Debian's
# Snakemake runs a 40-job workflow (t/slurm/snakemake: threads and
# memory, a retried rule, a failing one) through its own --slurm
# executor, unmodified, over banyan-slurm's sbatch, sacct, sinfo and srun;
# then through the profile Banyan ships for its generic cluster mode
# (etc/snakemake), over banyan batch, job info and cancel.
. "$(dirname "$0")/lib.sh"
need_tools snakemake

start_cluster 2 $'[resource]\nsynthetic = "node[0-1]: core:4,memory:8G"'
CLEANUP+=("banyan shutdown")
wait_for "the instance runs" 20 banyan ready
export PATH="$BANYAN_BUILD_DIR/bin/slurm:$PATH" USER=${USER:-$(id -un)}
cd "$T_DIR"
cp "$BANYAN_SOURCE_DIR/t/slurm/snakemake/Snakefile" .
# What a run leaves: the failing rule's job failed, everything else made.
made_all() {
    for i in $(seq 0 35); do test -f "out/$i.txt" || return 1; done
    test "$(wc -l <out/merged.txt)" = 36
}

# 1. The Slurm executor: sbatch, sacct (scontrol when sacct knows nothing
# yet), sinfo for a default partition, and srun inside each job.
check_fails "snakemake --slurm runs the workflow; the failing rule fails it" "Exiting because a job execution failed" \
    snakemake --slurm --jobs 10 --max-status-checks-per-second 1 --keep-going all out/failing.txt
check "every item and the merge were made" made_all
check_output "the rule with threads had its cores" "^cpus 2$" cat out/threads.txt
check_output "the retried rule succeeded on its second attempt" "^attempt 2$" cat out/retried.txt
check_output "its first attempt is FAILED in sacct" "^snakejob_retried_[0-9]+\|FAILED\|1:0$" \
    sacct -S 2020-01-01 -X -P -n -o JobName,State,ExitCode --name="$(sacct -S 2020-01-01 -X -P -n -o JobName | grep retried | head -1)"
check_output "the failing rule's job FAILED (snakemake in the job exits 1)" "^FAILED\|1:0$" \
    sh -c "sacct -S 2020-01-01 -X -P -n -o JobName,State,ExitCode | grep failing | cut -d'|' -f2-"
check_output "the threads rule's job had 2 cores" "\|2$" \
    sh -c "sacct -S 2020-01-01 -X -P -n -o JobName,AllocCPUS | grep threads"
check_output "41 jobs in all (40 rules, one retried)" "^41$" sh -c "sacct -S 2020-01-01 -X -n -P -o JobIDRaw | wc -l"

# 2. The profile for generic cluster mode: banyan batch, the shipped status
# command, banyan cancel.
rm -rf out .snakemake
check_fails "snakemake --profile etc/snakemake runs it too" "Exiting because a job execution failed" \
    snakemake --profile "$BANYAN_SOURCE_DIR/etc/snakemake" --jobs 10 --keep-going all out/failing.txt
check "every item and the merge were made again" made_all
check_output "the retried rule succeeded again" "^attempt 2$" cat out/retried.txt
check_output "the profile's jobs are named for their rules" "smk-item" banyan jobs -a -n 100 -o '{name}'
check_output "the status command says how a job ended" "^success$" \
    "$BANYAN_SOURCE_DIR/etc/snakemake/status" "$(banyan jobs -a --no-header -o '{id} {name}' | awk '$2 == "smk-merged" {print $1}')"
