#!/bin/bash
# Refused: one line naming the script, the line and the option.
#SBATCH --dependency=afterok:1?afterok:2
#ERROR 3: #SBATCH --dependency=afterok:1\?afterok:2: any-of lists
true
