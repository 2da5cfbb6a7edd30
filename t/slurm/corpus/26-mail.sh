#!/bin/bash
# Mail is stored with the job.
#SBATCH --mail-type=END,FAIL
#SBATCH --mail-user=someone@example.org
#EXPECT attributes/system/mail={"type": "END,FAIL", "user": "someone@example.org"}
true
