#!/bin/bash
# A script that fails: FAILED, with its exit code.
#SBATCH -o failing-%j.out
#RESULT FAILED 3:0
exit 3
