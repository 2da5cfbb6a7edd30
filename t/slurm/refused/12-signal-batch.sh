#!/bin/bash
# Refused: one line naming the script, the line and the option.
#SBATCH --signal=B:USR1@60
#ERROR 3: #SBATCH --signal=B:USR1@60: B: and R:
true
