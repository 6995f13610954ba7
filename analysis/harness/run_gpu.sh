#!/usr/bin/env bash
# Every GPU deliverable of the validation harness in one go (docs/validation.md,
# "Running the GPU validation"). Run from anywhere inside a checkout; no install
# needed (PYTHONPATH is set to the checkout root).
#
#   analysis/harness/run_gpu.sh [OUT]            # one CUDA GPU; OUT defaults to data/harness-gpu
#   analysis/harness/run_gpu.sh --dry-run [OUT]  # CPU smoke test: tiny config, small benchmarks
#   CPU_SMOKE=1 analysis/harness/run_gpu.sh      # the same as --dry-run
#   PYTHON=/path/to/python analysis/harness/run_gpu.sh
#   STEPS="harness docs_page" HARNESS_STAGE=analyze analysis/harness/run_gpu.sh
#       (a rerun of some steps only; HARNESS_STAGE=analyze re-analyses the sweeps in OUT)
#
# Steps (each logged to OUT/logs/<step>.txt; rc and seconds in OUT/logs/steps.tsv):
#   env            git commit, nvidia-smi, python/torch/CUDA and package versions
#   pytest_gpu     python -m pytest -m gpu -q
#   harness        python -m empirical_batch.cli harness --config full --device cuda --out OUT
#                  --overwrite --time-budget PIECE_SECONDS, repeated until the run is complete
#                  (each piece stops between units when the next would not fit, keeps what
#                  it finished, and the next piece continues; PIECE_SECONDS defaults to 420,
#                  so a piece stays under a 10-minute command limit; MAX_PIECES=N stops after
#                  N pieces, e.g. MAX_PIECES=1 for one piece per call of this script: rerun it
#                  with STEPS=harness until the log says "harness complete").
#                  Logs: OUT/logs/harness.piece-K.txt; total wall time of the pieces in
#                  OUT/logs/harness_wall_s.txt; per-stage times in OUT/manifest.json; with
#                  HARNESS_STAGE=analyze: harness_analyze.piece-K.txt, harness_analyze_wall_s.txt.
#                  --overwrite removes only files that an older run's manifests list.
#   docs_page      python -m analysis.harness.docs_page OUT --section full
#                  (fills the "harness report full" section of docs/validation.md and
#                  docs/img/harness-full/; in the smoke mode a copy under OUT/docs instead)
#   bench_harness  python benchmarks/bench_harness.py --config full --scale 0.05 --device cuda
#                  --modes graphed batched --estimate (and the preset priced at the rates
#                  measured there: benchmarks/estimate_harness.py)
#   bench_simulate python benchmarks/bench_simulate.py
#   bench_measure  python benchmarks/bench_measure.py --device cuda --reps 15
#   bench_measure_gpt2  python benchmarks/bench_measure.py --device cuda --models gpt2 --bf16
#                  --gpt2-batch 32 --reps 15 --no-ddp   (the 124M model; docs/measure.md)
# The text_lm task reads Tiny Shakespeare through empirical_batch.datasets (fetched once
# into the data folder, or a local copy named by EMPIRICAL_BATCH_DATA), or the file named
# by EMPIRICAL_BATCH_TEXT.
# A failing step does not stop the later ones (except the preflight checks); the script
# exits 1 if any step failed, and the summary names them.
set -euo pipefail

usage() { sed -n '2,/^set -e/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; }

SMOKE="${CPU_SMOKE:-0}"
OUT=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --dry-run|--cpu-smoke) SMOKE=1; shift ;;
        -h|--help) usage; exit 0 ;;
        -*) echo "run_gpu.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) if [[ -n "$OUT" ]]; then echo "run_gpu.sh: one OUT folder only" >&2; exit 2; fi
           OUT="$1"; shift ;;
    esac
done
[[ "$SMOKE" == "1" ]] || SMOKE=0

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
case "$OUT" in ""|/*) ;; *) OUT="$PWD/$OUT" ;; esac  # a relative OUT is from the caller's cwd
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export MPLBACKEND=Agg
if [[ -z "$OUT" ]]; then
    if [[ "$SMOKE" == 1 ]]; then OUT="$(mktemp -d)/harness-smoke"; else OUT="data/harness-gpu"; fi
fi
mkdir -p "$OUT/logs"
OUT="$(cd "$OUT" && pwd)"
LOGS="$OUT/logs"

if [[ "$SMOKE" == 1 ]]; then
    MODE="CPU smoke (tiny config, small benchmarks; numbers check plumbing only)"
    DEVICE=cpu
    HARNESS_ARGS=(--config tiny --tasks teacher_student --device cpu)
    BENCH_HARNESS_ARGS=(--config tiny --tasks teacher_student --scale 0.25 --device cpu)
    BENCH_SIMULATE_ARGS=(--dims 200 --mc-steps 5)
    BENCH_MEASURE_ARGS=(--device cpu --quick --no-ddp --models mlp)
    BENCH_GPT2_ARGS=(--device cpu --quick --no-ddp --models gpt2 --gpt2-seq 16 --gpt2-batch 4)
    PYTEST_ARGS=(-m gpu -q tests/test_harness_trainer.py)
    mkdir -p "$OUT/docs"
    cp docs/validation.md "$OUT/docs/validation.md"
    DOCS_ARGS=(--section full --page "$OUT/docs/validation.md")
else
    MODE="GPU (full config)"
    DEVICE=cuda
    HARNESS_ARGS=(--config full --device cuda)
    BENCH_HARNESS_ARGS=(--config full --scale 0.05 --device cuda --modes graphed batched --estimate)
    BENCH_SIMULATE_ARGS=()
    BENCH_MEASURE_ARGS=(--device cuda --reps 15)
    BENCH_GPT2_ARGS=(--device cuda --models gpt2 --bf16 --gpt2-batch 32 --reps 15 --no-ddp)
    PYTEST_ARGS=(-m gpu -q)
    DOCS_ARGS=(--section full)
fi

ALL_STEPS="env pytest_gpu harness docs_page bench_harness bench_simulate bench_measure bench_measure_gpt2"
STEPS="${STEPS:-$ALL_STEPS}"
for s in $STEPS; do
    case " $ALL_STEPS " in *" $s "*) ;; *) echo "run_gpu.sh: unknown step $s in STEPS (steps: $ALL_STEPS)" >&2; exit 2 ;; esac
done
want() { case " $STEPS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
HARNESS_STAGE="${HARNESS_STAGE:-all}"
case "$HARNESS_STAGE" in all|sweep|analyze) ;; *) echo "run_gpu.sh: HARNESS_STAGE must be all, sweep or analyze" >&2; exit 2 ;; esac
HARNESS_ARGS+=(--stage "$HARNESS_STAGE" --overwrite)
PIECE_SECONDS="${PIECE_SECONDS:-420}"
MAX_PIECES="${MAX_PIECES:-0}"
[[ "$PIECE_SECONDS" =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "run_gpu.sh: PIECE_SECONDS must be a number of seconds" >&2; exit 2; }
[[ "$MAX_PIECES" =~ ^[0-9]+$ ]] || { echo "run_gpu.sh: MAX_PIECES must be an integer (0: no limit)" >&2; exit 2; }

echo "run_gpu.sh: $MODE"
echo "  checkout $ROOT"
echo "  output   $OUT"
echo "  python   $PYTHON"

# ------------------------------------------------------------------ preflight (fatal)
if ! command -v "$PYTHON" >/dev/null 2>&1; then
    echo "run_gpu.sh: PYTHON=$PYTHON not found; set PYTHON=/path/to/python" >&2
    exit 2
fi
if ! "$PYTHON" - "$DEVICE" > "$LOGS/preflight.txt" 2>&1 <<'EOF'
import importlib
import sys

try:
    import torch
except ImportError as exc:
    sys.exit(f"torch is not importable ({exc})")
if sys.argv[1] == "cuda":
    if not torch.cuda.is_available():
        sys.exit(f"CUDA is not available to torch {torch.__version__} (built for CUDA "
                 f"{torch.version.cuda}); this runbook needs one CUDA GPU. For a CPU smoke "
                 "test of the script itself use --dry-run or CPU_SMOKE=1.")
    print("cuda device:", torch.cuda.get_device_name(0))
missing = []
for name in ("numpy", "scipy", "sympy", "pandas", "matplotlib", "tqdm", "sklearn",
             "pytest", "hypothesis"):
    try:
        importlib.import_module(name)
    except ImportError as exc:
        missing.append(f"{name} ({exc})")
if missing:
    sys.exit("missing packages: " + ", ".join(missing))

import empirical_batch
import empirical_batch.harness.config  # noqa: F401

print("empirical_batch", empirical_batch.__version__, "from", empirical_batch.__file__)
print("preflight ok")
EOF
then
    cat "$LOGS/preflight.txt" >&2
    echo "run_gpu.sh: preflight failed (log: $LOGS/preflight.txt)" >&2
    exit 2
fi
cat "$LOGS/preflight.txt"

# ------------------------------------------------------------------ steps
FAILED=()
# appended to, so that a rerun of some steps (STEPS=...) keeps the earlier records
[[ -f "$LOGS/steps.tsv" ]] || printf 'step\trc\tseconds\tcommand\n' > "$LOGS/steps.tsv"

run_step() {  # run_step NAME CMD...: tee stdout+stderr to LOGS/NAME.txt, record rc and time
    local name="$1"; shift
    echo
    echo "=== $name: $*"
    local t0 t1 rc=0
    t0=$(date +%s.%N)
    { echo "\$ $*"; echo "# started $(date -u +%Y-%m-%dT%H:%M:%SZ)"; } > "$LOGS/$name.txt"
    "$@" 2>&1 | tee -a "$LOGS/$name.txt" || rc=$?
    t1=$(date +%s.%N)
    local secs
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$secs" "$*" >> "$LOGS/steps.tsv"
    echo "# rc=$rc after ${secs} s" | tee -a "$LOGS/$name.txt"
    if [[ "$rc" != 0 ]]; then FAILED+=("$name"); fi
    LAST_SECONDS="$secs"
    return 0
}

record_env() {
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "mode: $MODE"
    echo "host: $(hostname 2>/dev/null || echo unknown)"
    if git -C "$ROOT" rev-parse HEAD >/dev/null 2>&1; then
        echo "git commit: $(git -C "$ROOT" rev-parse HEAD)"
        echo "git branch: $(git -C "$ROOT" rev-parse --abbrev-ref HEAD)"
        local dirty
        dirty=$(git -C "$ROOT" status --porcelain --untracked-files=no | wc -l)
        echo "git tracked files modified: $dirty"
    else
        echo "git commit: unknown (not a git checkout)"
    fi
    echo
    if command -v nvidia-smi >/dev/null 2>&1; then
        nvidia-smi || echo "nvidia-smi failed (rc $?)"
    else
        echo "nvidia-smi: not found"
    fi
    echo
    "$PYTHON" -c 'import torch; print(torch.__version__)'
    "$PYTHON" - <<'EOF'
import platform

import numpy, pandas, scipy, sklearn, torch

print("python", platform.python_version())
print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn",
      torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None)
print("cuda available:", torch.cuda.is_available())
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print("device:", p.name, f"{p.total_memory / 2**30:.1f} GiB", "capability", p.major, p.minor)
print("numpy", numpy.__version__, "scipy", scipy.__version__, "pandas", pandas.__version__,
      "scikit-learn", sklearn.__version__)
print("cpu threads (torch):", torch.get_num_threads())
print("float32 matmul precision:", torch.get_float32_matmul_precision())
EOF
}

want env && run_step env record_env
want pytest_gpu && run_step pytest_gpu "$PYTHON" -m pytest ${PYTEST_ARGS[@]+"${PYTEST_ARGS[@]}"}
HARNESS_LOG=harness
[[ "$HARNESS_STAGE" == all ]] || HARNESS_LOG="harness_$HARNESS_STAGE"
HARNESS_DONE=0
if want harness; then
    piece=0
    total=0
    while :; do
        piece=$((piece + 1))
        run_step "$HARNESS_LOG.piece-$piece" "$PYTHON" -m empirical_batch.cli harness \
            ${HARNESS_ARGS[@]+"${HARNESS_ARGS[@]}"} --out "$OUT" --time-budget "$PIECE_SECONDS"
        total=$(awk -v a="$total" -v b="$LAST_SECONDS" 'BEGIN { printf "%.1f", a + b }')
        if [[ " ${FAILED[*]-} " == *" $HARNESS_LOG.piece-$piece "* ]]; then break; fi
        if ! grep -q "^continue with:" "$LOGS/$HARNESS_LOG.piece-$piece.txt"; then
            HARNESS_DONE=1
            echo "harness complete after $piece piece(s) in this call" | tee -a "$LOGS/$HARNESS_LOG.piece-$piece.txt"
            break
        fi
        if [[ "$MAX_PIECES" != 0 && "$piece" -ge "$MAX_PIECES" ]]; then
            echo "run_gpu.sh: $piece piece(s) done, the harness is not complete: run again with STEPS=harness to continue"
            break
        fi
    done
    echo "$total" > "$LOGS/${HARNESS_LOG}_wall_s.txt"
fi
if want docs_page && want harness && [[ "$HARNESS_DONE" == 0 ]]; then
    echo "run_gpu.sh: the harness is not complete: docs_page skipped" | tee "$LOGS/docs_page.txt"
elif want docs_page; then
    if [[ -f "$OUT/report.md" ]]; then
        run_step docs_page "$PYTHON" -m analysis.harness.docs_page "$OUT" \
            ${DOCS_ARGS[@]+"${DOCS_ARGS[@]}"}
    else
        echo "run_gpu.sh: no $OUT/report.md (the harness failed): docs_page skipped" | \
            tee "$LOGS/docs_page.txt"
        FAILED+=("docs_page")
    fi
fi
want bench_harness && run_step bench_harness "$PYTHON" benchmarks/bench_harness.py \
    ${BENCH_HARNESS_ARGS[@]+"${BENCH_HARNESS_ARGS[@]}"}
want bench_simulate && run_step bench_simulate "$PYTHON" benchmarks/bench_simulate.py \
    ${BENCH_SIMULATE_ARGS[@]+"${BENCH_SIMULATE_ARGS[@]}"}
want bench_measure && run_step bench_measure "$PYTHON" benchmarks/bench_measure.py \
    ${BENCH_MEASURE_ARGS[@]+"${BENCH_MEASURE_ARGS[@]}"}
want bench_measure_gpt2 && run_step bench_measure_gpt2 "$PYTHON" benchmarks/bench_measure.py \
    ${BENCH_GPT2_ARGS[@]+"${BENCH_GPT2_ARGS[@]}"}
if [[ "$SMOKE" == 0 ]] && command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi > "$LOGS/nvidia-smi-end.txt" 2>&1 || true
fi

echo
echo "=== summary ($MODE)"
column -t -s $'\t' "$LOGS/steps.tsv" 2>/dev/null || cat "$LOGS/steps.tsv"
if [[ -f "$LOGS/${HARNESS_LOG}_wall_s.txt" ]]; then
    echo "$HARNESS_LOG wall time: $(cat "$LOGS/${HARNESS_LOG}_wall_s.txt") s" \
         "(per stage: $OUT/manifest*.json)"
fi
echo "outputs: $OUT (report.md, results/, figures/, sweeps/, manifest.json), logs: $LOGS"
if [[ "$SMOKE" == 0 ]]; then
    echo "docs: docs/validation.md (section 'harness report full') and docs/img/harness-full/"
fi
if [[ ${#FAILED[@]} -gt 0 ]]; then
    echo "FAILED steps: ${FAILED[*]} (see $LOGS/<step>.txt)" >&2
    exit 1
fi
echo "all steps passed"
