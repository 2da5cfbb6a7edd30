#!/bin/bash
# One GPU on the node.
#SBATCH --gres=gpu:1
#SBATCH -o gres-%j.out
#EXPECT resources/0/with/1/type="gpu"
#EXPECT resources/0/with/1/count=1
#CHECK grep -qx "gpus [0-9]" gres-$ID.out
echo "gpus $CUDA_VISIBLE_DEVICES"
