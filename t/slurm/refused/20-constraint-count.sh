#!/bin/bash
# Refused: one line naming the script, the line and the option.
#SBATCH -C "[rack1*2&rack2*4]"
#ERROR 3: #SBATCH -C \[rack1\*2&rack2\*4\]: counts and brackets
true
