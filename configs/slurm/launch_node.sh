#!/bin/bash
# Runs on every node of a Slurm allocation (started by train_multinode.sbatch through srun):
# works out this node's rank and the rendezvous address, then execs `accelerate launch` for the
# edumas train stage through `python -m pipelines.training.distributed launch`.
#
# Reads: SLURM_NODEID, SLURM_NNODES, SLURM_JOB_NODELIST (set by Slurm); ACCELERATE_CONFIG,
# TRAIN_ARGS, MAIN_PROCESS_PORT, GPUS_PER_NODE, VENV (set by the sbatch file). DRY_RUN=1 prints the
# command instead of running it.
set -euo pipefail

: "${SLURM_NODEID:?run me under srun (SLURM_NODEID is not set)}"
: "${SLURM_NNODES:?run me under srun (SLURM_NNODES is not set)}"
: "${SLURM_JOB_NODELIST:?run me under srun (SLURM_JOB_NODELIST is not set)}"
ACCELERATE_CONFIG="${ACCELERATE_CONFIG:-configs/accelerate/zero3_multinode.yaml}"
TRAIN_ARGS="${TRAIN_ARGS:---params params.yaml --section train.sft}"
MAIN_PROCESS_PORT="${MAIN_PROCESS_PORT:-29500}"
GPUS_PER_NODE="${GPUS_PER_NODE:-8}"
VENV="${VENV:-.venv}"

# The first host of the allocation hosts the rendezvous (rank 0).
MAIN_PROCESS_IP="$(scontrol show hostnames "${SLURM_JOB_NODELIST}" | sed -n 1p)"  # sed reads all: no SIGPIPE under pipefail
if [[ -z "${MAIN_PROCESS_IP}" ]]; then
    echo "launch_node.sh: cannot read the first host of SLURM_JOB_NODELIST=${SLURM_JOB_NODELIST}" >&2
    exit 2
fi

if [[ -x "${VENV}/bin/python" ]]; then
    PYTHON="${VENV}/bin/python"
    export PATH="$(cd "${VENV}/bin" && pwd):${PATH}"
else
    PYTHON="${PYTHON:-python}"
fi

DRY=()
if [[ "${DRY_RUN:-0}" == "1" ]]; then
    DRY=(--dry-run)
fi

read -r -a STAGE_ARGS <<< "${TRAIN_ARGS}"
# Arrays that may be empty expand as ${A[@]+"${A[@]}"}: bash 4.3 and older treat "${A[@]}" of an empty
# array as unbound under set -u (still common on cluster login images).
echo "node $(hostname) rank ${SLURM_NODEID}/${SLURM_NNODES}, rendezvous ${MAIN_PROCESS_IP}:${MAIN_PROCESS_PORT}" >&2
exec "${PYTHON}" -m pipelines.training.distributed launch ${DRY[@]+"${DRY[@]}"} \
    --config-file "${ACCELERATE_CONFIG}" \
    --num-machines "${SLURM_NNODES}" \
    --processes-per-machine "${GPUS_PER_NODE}" \
    --machine-rank "${SLURM_NODEID}" \
    --main-process-ip "${MAIN_PROCESS_IP}" \
    --main-process-port "${MAIN_PROCESS_PORT}" \
    -- ${STAGE_ARGS[@]+"${STAGE_ARGS[@]}"}
