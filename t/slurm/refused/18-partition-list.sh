#!/bin/bash
# Refused: one line naming the script, the line and the option.
#SBATCH -p batch,debug
#ERROR 3: #SBATCH -p batch,debug: a list of partitions
true
