#!/bin/bash
# Refused: one line naming the script, the line and the option.
#SBATCH -d afterok:12+5
#ERROR 3: #SBATCH -d afterok:12\+5: .*a delay
true
