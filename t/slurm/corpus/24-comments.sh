#!/bin/bash
# Comments after a directive, as sites write them; an indented #SBATCH is
# a comment, as sbatch reads it; -N alone is a task a node, the node shared.
#SBATCH -N 1            # one node
#SBATCH -J commented    # the job's name
  #SBATCH -J indented
#EXPECT attributes/system/job/name="commented"
#EXPECT resources/0/count=1
#EXPECT resources/0/with/0/count=1
true
