#!/bin/bash
# Nothing of the submitter's environment.
#SBATCH --export=NONE
#SBATCH -o none-%j.out
#CHECK grep -qx "FOO=" none-$ID.out
echo "FOO=$FOO"
