#!/bin/bash
# Refused: one line naming the script, the line and the option.
#SBATCH --wrap=hostname
#ERROR 3: #SBATCH --wrap=hostname: only on the command line
true
