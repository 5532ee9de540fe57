#!/bin/bash
# Build one of NVSHMEM's sides of our benchmarks (scopes_bw, coll_block) with
# nvcc against NVSHMEM (the nvidia-nvshmem-cu13 wheel, or NVSHMEM_HOME) and run
# it with NPES PEs on GPU 0 under a private MPS daemon, as shmem-run runs our
# PEs. Prints PE 0's JSON line; the readable table goes to stderr.
#   usage: benchmarks/nvshmem/run.sh PROGRAM [NPES [ARGS...]]
#   e.g.   benchmarks/nvshmem/run.sh scopes_bw 2 268435456
#          benchmarks/nvshmem/run.sh coll_block 4
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PROGRAM=${1:?name the program: scopes_bw or coll_block}
NPES=${2:-2}
shift $(( $# < 2 ? $# : 2 ))
NVSHMEM_HOME=${NVSHMEM_HOME:-$(python3 -c 'import nvidia.nvshmem as m; print(list(m.__path__)[0])')}
WORK=$(mktemp -d /tmp/nvshmem-twin.XXXXXX)
mkdir -p "$WORK/lib" "$WORK/sync" "$WORK/mps" "$WORK/log"
# the wheel has only libnvshmem_host.so.3: the linker needs the plain name
ln -s "$NVSHMEM_HOME/lib/libnvshmem_host.so.3" "$WORK/lib/libnvshmem_host.so"
nvcc -O3 -std=c++17 -rdc=true -arch=sm_90 -I"$NVSHMEM_HOME/include" "$HERE/$PROGRAM.cu" \
    -o "$WORK/$PROGRAM" -L"$WORK/lib" -L"$NVSHMEM_HOME/lib" -lnvshmem_device -lnvshmem_host \
    -Xlinker -rpath="$NVSHMEM_HOME/lib"
# one node, peer-to-peer only, NVLink multicast off
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_MNNVL=1
export NVSHMEM_REMOTE_TRANSPORT=none NVSHMEM_DISABLE_NCCL=1 NVSHMEM_SYMMETRIC_SIZE=1073741824
export NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME=lo NVSHMEM_IGNORE_CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=1
export CUDA_MPS_PIPE_DIRECTORY=$WORK/mps CUDA_MPS_LOG_DIRECTORY=$WORK/log
nvidia-cuda-mps-control -d
stop() { echo quit | nvidia-cuda-mps-control || true; rm -rf "$WORK"; }
trap stop EXIT
export SCOPES_NPES=$NPES SCOPES_SYNC_DIR=$WORK/sync
others=()
for pe in $(seq 1 $((NPES - 1))); do
  SCOPES_PE=$pe "$WORK/$PROGRAM" "$@" > /dev/null &
  others+=($!)
done
SCOPES_PE=0 "$WORK/$PROGRAM" "$@"
for pid in "${others[@]}"; do wait "$pid"; done
