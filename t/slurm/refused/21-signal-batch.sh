#!/bin/bash
# Refused: one line naming the script, the line and the option.
#SBATCH --signal=USR1@30
#ERROR 3: #SBATCH --signal=USR1@30: on a batch job is not supported
true
