#!/bin/bash
# Only what is named: FOO as it is, BAR given.
#SBATCH --export=FOO,BAR=two
#SBATCH -o list-%j.out
#EXPECT attributes/system/environment/FOO="one"
#EXPECT attributes/system/environment/BAR="two"
#CHECK grep -qx "one two -" list-$ID.out
echo "$FOO $BAR ${OTHER:--}"
