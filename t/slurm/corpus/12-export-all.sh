#!/bin/bash
# ALL: the submitter's value of FOO wins over the one given.
#SBATCH --export=ALL,FOO=overridden,NEW=new
#SBATCH -o all-%j.out
#EXPECT attributes/system/environment/FOO="one"
#EXPECT attributes/system/environment/NEW="new"
#CHECK grep -qx "one new set" all-$ID.out
echo "$FOO $NEW ${OTHER:+set}"
