#!/bin/bash
# #BANYAN lines win over #SBATCH lines, wherever they are.
#BANYAN --job-name=banyan-name
#SBATCH --job-name=slurm-name
#SBATCH --time=7
#EXPECT attributes/system/job/name="banyan-name"
#EXPECT attributes/system/duration=420
true
