#!/bin/bash
# Run in another directory, relative to where sbatch ran.
#SBATCH --chdir=work
#SBATCH --output=chdir.out
#EXPECT attributes/system/shell/options/output/stdout/path="chdir.out"
#CHECK grep -q "/work$" work/chdir.out
pwd
