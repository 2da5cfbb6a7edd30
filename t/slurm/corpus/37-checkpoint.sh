#!/bin/bash
# The checkpoint idiom: the batch shell (B:) gets USR1 45 s before the
# one-minute limit, and its trap writes the checkpoint; the work runs in
# the background so that the shell's wait returns to the trap at once.
#SBATCH --time=1
#SBATCH --signal=B:USR1@45
#SBATCH --output=checkpoint-%j.out
#EXPECT attributes/system/shell/options/signal/timeleft=45
#EXPECT tasks/0/command/3="--signal-to=script"
#CHECK grep -qx "checkpoint of $ID at USR1" checkpoint-$ID.out
trap 'echo "checkpoint of $SLURM_JOB_ID at USR1"; exit 0' USR1
sleep 120 &
wait
