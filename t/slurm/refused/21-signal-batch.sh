#!/bin/bash
# Refused: a batch job's instance passes on only USR1 and USR2; any other
# signal would end its brokers.
#SBATCH --signal=HUP@30
#ERROR 4: #SBATCH --signal=HUP@30: 'HUP': a batch job passes on only USR1 and USR2
true
