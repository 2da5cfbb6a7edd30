#!/bin/bash
#SBATCH --time=90
#EXPECT attributes/system/duration=5400
true
