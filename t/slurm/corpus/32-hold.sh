#!/bin/bash
# Held until released.
#SBATCH --hold
#SBATCH -o held-%j.out
#CHECK test -f held-$ID.out
true
