#!/bin/bash
# Refused: one line naming the script, the line and the option.
#SBATCH -o out-%J.txt
#ERROR 3: #SBATCH -o out-%J.txt: .*%J is not supported
true
