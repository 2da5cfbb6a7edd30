#!/bin/bash
# Refused: one line naming the script, the line and the option.
#SBATCH -t 1:2:3:4
#ERROR 3: #SBATCH -t 1:2:3:4: '1:2:3:4': expected MM
true
