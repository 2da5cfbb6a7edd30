#!/bin/bash
#SBATCH --partition=debug
#EXPECT attributes/system/queue="debug"
true
