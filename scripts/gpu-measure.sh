#!/usr/bin/env bash
# The single-GPU measurements of docs/gpu.md, in one go, on a host with PyTorch and Triton (vLLM and
# Ray may be absent; DeepSpeed is needed for the learner step):
#   bash scripts/gpu-measure.sh [OUT]          # OUT: where logs and JSON go (runs/gpu)
# 1. the kernels against their references on CUDA (pytest -m gpu tests/kernels)
# 2. benchmarks/kernels.py at 16k tokens x 151,936 vocabulary, hidden 4096 and 2048
# 3. benchmarks/learner_gpu.py: a learner bf16 step, ZeRO-1 and ZeRO-2 with fp32 accumulation,
#    ZeRO-0 with bf16 accumulation (DeepSpeed refuses fp32 accumulation there)
# 4. benchmarks/decode_roofline.py --fuse: decode steps and a prefill of Qwen3-1.7B's shape against
#    jury simulate's generation formula (HARDWARE: the card's entry in configs/simulate/hardware.yaml;
#    DECODE_ARGS: more of its options, e.g. "--batches 64,256,512 --prompt 256,1024,4096")
# 5. benchmarks/weight_sync_gpu.py: the learner's WeightSender over NCCL, per-bucket cost and recovery
# Each stage has its own time limit and a failure in one does not stop the others.
# STAGES picks some: STAGES="learner decode" LEARNER_ZERO="1" bash scripts/gpu-measure.sh
set -u
out=${1:-runs/gpu}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 DS_ACCELERATOR=cuda
# `jury` importable from this checkout without installing it: a package folder of links
farm=$(mktemp -d)
mkdir "$farm/jury"
for d in protocol data models actors learner verifiers kernels cluster experiments; do ln -s "$PWD/$d" "$farm/jury/$d"; done
export PYTHONPATH="$farm${PYTHONPATH:+:$PYTHONPATH}"
log="$out/gpu-measure.log"
stage() { echo "=== $* ($(date -u +%T))" | tee -a "$log"; }
stage versions
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c "import torch, triton, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, 'transformers', transformers.__version__)"
  python3 -c "import deepspeed; print('deepspeed', deepspeed.__version__)"; } 2>&1 | grep -v WARNING | tee -a "$log"
stages=" ${STAGES:-tests kernels learner decode sync} "
if [[ $stages == *" tests "* ]]; then
stage "pytest -m gpu tests/kernels"
timeout ${PYTEST_S:-200} python3 -m pytest -q -rs -m gpu -p no:cacheprovider tests/kernels 2>&1 | tee -a "$log"
fi
[[ $stages == *" kernels "* ]] && for h in 4096 2048; do
  stage "kernels benchmark, hidden $h"
  timeout ${KERNELS_S:-110} python3 benchmarks/kernels.py --hidden "$h" --impls eager,ours \
    --json "$out/kernels_h$h.json" 2>&1 | tee -a "$log"
done
[[ $stages == *" learner "* ]] && for setting in "1 fp32" "2 fp32" "0 bf16"; do
  set -- $setting
  [[ " ${LEARNER_ZERO:-1 2 0} " == *" $1 "* ]] || continue
  stage "learner step, ZeRO-$1, $2 accumulation"
  timeout ${LEARNER_S:-75} python3 benchmarks/learner_gpu.py --zero "$1" --accum "$2" --steps 2 \
    --json "$out/learner_z$1.json" 2>&1 | grep -v "^\[20\|^MA \|^CPU Virtual\|bf16_optimizer\|initializing group" | tail -25 | tee -a "$log"
done
if [[ $stages == *" decode "* ]]; then
  stage "decode roofline against jury simulate, ${HARDWARE:-h100-sxm} figures"
  timeout ${DECODE_S:-150} python3 benchmarks/decode_roofline.py --fuse --profile --hardware "${HARDWARE:-h100-sxm}" \
    ${DECODE_ARGS:-} --json "$out/decode.json" 2>&1 | grep -v '^{' | tee -a "$log"
fi
if [[ $stages == *" sync "* ]]; then
  stage "weight sync: the learner's sender over NCCL, one rank"
  timeout ${SYNC_S:-120} python3 benchmarks/weight_sync_gpu.py --json "$out/weight_sync.json" 2>&1 | grep -v '^{' | tee -a "$log"
fi
stage done
