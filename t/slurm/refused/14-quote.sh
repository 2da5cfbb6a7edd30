#!/bin/bash
# Refused: one line naming the script, the line and the option.
#SBATCH -J "unclosed
#ERROR 3: #SBATCH -J "unclosed: a quote is not closed
true
