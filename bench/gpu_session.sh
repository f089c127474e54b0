#!/usr/bin/env bash
# docs/gpu.md's measurement on a machine with one NVIDIA GPU: bench/gpu.py --profile, then --compare, each under a
# time limit of its own (LIMIT_S, default 300 s: each is sized to finish well inside it, warm-up and compilation
# included), everything under $OUT:
#   $OUT/nvidia-smi.txt            the card, its driver and CUDA version
#   $OUT/profile/                  profile.json, trace.json, ops.txt, tests.log (bench/gpu_profile.py)
#   $OUT/compare/gpu_compare.json  before/after, the loss check, the hosts' epochs (bench/gpu_compare.py)
#   $OUT/{profile,compare}.log     what each printed, and its exit status on the last line
#
#   OUT=results/gpu-session bash bench/gpu_session.sh            # both, one after the other (~8-10 min)
#   OUT=results/gpu-session bash bench/gpu_session.sh profile    # one of them: profile or compare
#   DRY=1 OUT=/tmp/x bash bench/gpu_session.sh profile           # on a CPU: --dry, the plumbing (tests/bench)
#
# A command stopped by its limit keeps what it had written (each writes its JSON after every part). After a GPU
# run, `cp $OUT/compare/gpu_compare.json studies/gpu_measured.json` makes studies/paper.py print measured GPU-hours.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-results/gpu-session}"
LIMIT_S="${LIMIT_S:-300}"
if [ -n "${PYTHON:-}" ]; then PY="$PYTHON"; elif [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
dry=()
if [ -n "${DRY:-}" ]; then dry=(--dry); fi
which="${1:-all}"
case "$which" in all|profile|compare) ;; *) echo "usage: $0 [all|profile|compare]" >&2; exit 2 ;; esac
mkdir -p "$OUT"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || echo "nvidia-smi: not found or failed" >> "$OUT/nvidia-smi.txt"

status=0
for part in profile compare; do
  if [ "$which" != all ] && [ "$which" != "$part" ]; then continue; fi
  echo "== bench/gpu.py --$part (limit ${LIMIT_S} s) =="
  start=$(date +%s)
  timeout -k 15 "$LIMIT_S" "$PY" bench/gpu.py "--$part" "${dry[@]}" --out "$OUT/$part" > "$OUT/$part.log" 2>&1
  rc=$?
  echo "exit $rc after $(( $(date +%s) - start )) s (124: stopped by the limit)" >> "$OUT/$part.log"
  tail -n 25 "$OUT/$part.log"
  [ "$rc" -eq 0 ] || status=1
done
exit "$status"
