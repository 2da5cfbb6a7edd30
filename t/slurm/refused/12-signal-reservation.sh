#!/bin/bash
# Refused: one line naming the script, the line and the option.
#SBATCH --signal=R:USR1@60
#ERROR 3: #SBATCH --signal=R:USR1@60: R: \(a reservation's end\) is not supported
true
