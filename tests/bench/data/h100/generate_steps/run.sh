#!/usr/bin/env bash
# Third H100 loan: eager generate's decode step against batch, under transformers 4.46.3 (the
# published rows' release) and the image's own release, with kernels counted by torch.profiler.
# Ran from .whl446/ (ignored), which held this script and, from `pip download --no-deps
# --only-binary=:all: --python-version 3.12 --platform manylinux_2_17_x86_64`: transformers
# 4.46.3, tokenizers 0.20.3 and huggingface_hub 0.26.5 (the image has transformers 5.17).
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit,clocks.max.sm --format=csv | tee $OUT/env.txt
nproc >> $OUT/env.txt; lscpu | grep -E "Model name|MHz" >> $OUT/env.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site446 .whl446/*.whl || exit 1
PYTHONPATH=/tmp/site446 python3 -c "import torch, transformers; print('A', torch.__version__, transformers.__version__)" 2>&1 | tail -2 | tee -a $OUT/env.txt
python3 -c "import torch, transformers; print('B', torch.__version__, transformers.__version__)" 2>&1 | tail -2 | tee -a $OUT/env.txt
S=benchmarks/gpu_generate_steps.py
PYTHONPATH=/tmp/site446 timeout 300 python3 $S --out $OUT/steps_tf446.jsonl --deadline-s 235 \
  --run meta-llama--Llama-3.1-8B:bfloat16:sdpa:1,8,32:64:100 \
  --run Qwen--Qwen2.5-3B-Instruct:float16:sdpa:1,8,32:64:100 \
  --run meta-llama--Llama-2-13b-hf:float16:eager:1,4,16:512:64 \
  --run meta-llama--Llama-2-13b-hf:float16:sdpa:1,4,16:512:64 2>&1 | grep -v -E "USDT|profiler_st" | tee $OUT/log_tf446.txt
timeout 250 python3 $S --out $OUT/steps_image.jsonl --deadline-s 190 \
  --run meta-llama--Llama-3.1-8B:bfloat16:sdpa:1,8,32:64:100 \
  --run meta-llama--Llama-2-13b-hf:float16:eager:1,16:512:64 \
  --run Qwen--Qwen2.5-32B-Instruct:bfloat16:sdpa:1,32:64:100 2>&1 | grep -v -E "USDT|profiler_st" | tee $OUT/log_image.txt
ls -la $OUT
