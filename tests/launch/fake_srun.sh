#!/bin/sh
# fake_srun.sh N COMMAND...: starts N copies of COMMAND on this host with the
# variables srun gives the tasks of a one-node step (SLURM_PROCID, SLURM_NTASKS,
# SLURM_LOCALID, SLURM_NODEID, SLURM_STEP_NODELIST, SLURM_JOB_ID,
# SLURM_STEP_ID) and none of braid's (no BRAID_TOKEN, MASTER_ADDR or
# MASTER_PORT), and exits with the first non-zero status of a task.
set -u
n=$1
shift
unset BRAID_TOKEN MASTER_ADDR MASTER_PORT RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE
# A job id of our own, so parallel tests derive different ports and tokens.
job=$(( $$ * 7 % 900000 + 100000 ))
pids=""
i=0
while [ "$i" -lt "$n" ]; do
  SLURM_PROCID=$i SLURM_NTASKS=$n SLURM_LOCALID=$i SLURM_NODEID=0 \
  SLURM_STEP_NODELIST="$(hostname)" SLURM_JOB_ID=$job SLURM_STEP_ID=0 "$@" &
  pids="$pids $!"
  i=$((i + 1))
done
rc=0
for p in $pids; do
  wait "$p"
  r=$?
  [ "$rc" != 0 ] || rc=$r
done
exit "$rc"
