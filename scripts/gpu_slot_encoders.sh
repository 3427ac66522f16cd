#!/usr/bin/env bash
# Train slot-encoder variants side by side on one CUDA GPU for a fixed wall-clock budget, then pack
# each arm's kept weights for the trip back (docs/world_models.md, "slot encoders trained on a GPU").
#
#   scripts/gpu_slot_encoders.sh DATA_DIR OUT_DIR BUDGET_S [extra train args for every arm]
#
# DATA_DIR holds data_train.npz and data_eval.npz, collected where MuJoCo renders:
#   python -m world_models.slot_pretrain collect --frames 20000 --seed 1 --out DATA_DIR/data_train.npz
#   python -m world_models.slot_pretrain collect --frames 1600 --seed 2 --out DATA_DIR/data_eval.npz
# Each arm trains until BUDGET_S seconds have passed; its state is saved every 1,000 steps and its
# weights kept every 4,000 (weights_<step>.pt: the learning-rate schedule does not depend on the
# step count, so they are the weights `--steps <step>` ends with, up to the GPU's floating-point
# non-determinism). OUT_DIR/<arm>.tar holds the arm's
# log, its last train_state.pt and at most 6 kept weights, evenly spaced, the last always among them.
# `python -m world_models.slot_pretrain export --weights ... --data DATA_DIR/data_train.npz` makes a
# verified encoder of any of them. PYTHON (default python3) and DEVICE (default cuda) can be set.
set -u
export PYTHONUNBUFFERED=1
[ $# -ge 3 ] || { echo "usage: $0 DATA_DIR OUT_DIR BUDGET_S [train args...]" >&2; exit 2; }
data=$1 out=$2 budget=$3
shift 3
py=${PYTHON:-python3}
device=${DEVICE:-cuda}
for f in data_train.npz data_eval.npz; do
    [ -f "$data/$f" ] || { echo "DATA_DIR $data: no $f there; collect it first (see the header)" >&2; exit 2; }
done
mkdir -p "$out"
declare -A pids

arm() {
    local name=$1
    shift
    timeout -s TERM "$budget" "$py" -m world_models.slot_pretrain train --data "$data/data_train.npz" \
        --eval-data "$data/data_eval.npz" --out "$out/$name" --steps 1000000 --ckpt-every 1000 \
        --keep-every 4000 --eval-every 4000 --threads 2 --set "device=$device" "$@" \
        > "$out/$name.log" 2>&1 &
    pids[$name]=$!
}
arm b64 --batch-size 64 --seq-len 4 "$@"
arm b64_carry1 --batch-size 64 --seq-len 4 --set carry_iters=1 "$@"
arm b64_seq8 --batch-size 64 --seq-len 8 "$@"
arm b64_carry1_seq8 --batch-size 64 --seq-len 8 --set carry_iters=1 "$@"
for name in "${!pids[@]}"; do  # a crash is not the budget running out (124)
    wait "${pids[$name]}"
    rc=$?
    [ "$rc" -eq 124 ] && echo "$name: stopped at the budget" || echo "$name: exit $rc (see $out/$name.log)"
done

for name in b64 b64_carry1 b64_seq8 b64_carry1_seq8; do
    d=$out/$name
    [ -d "$d" ] || { echo "$name: no run directory"; continue; }
    mapfile -t kept < <(ls "$d"/weights_*.pt 2>/dev/null | sort)
    n=${#kept[@]}
    pick=()
    if [ "$n" -le 6 ]; then
        pick=("${kept[@]}")
    else
        for i in 0 1 2 3 4 5; do pick+=("${kept[$(( (n - 1) - (5 - i) * (n - 1) / 5 ))]}"); done
    fi
    files=("$name.log")
    [ -f "$d/log.jsonl" ] && files+=("$name/log.jsonl")
    [ -f "$d/train_state.pt" ] && files+=("$name/train_state.pt")
    for p in "${pick[@]}"; do files+=("$name/$(basename "$p")"); done
    tar -C "$out" -cf "$out/$name.tar" "${files[@]}"
    echo "$name: $n kept, packed ${#pick[@]}; last: $(grep -o 'step [0-9]*/' "$out/$name.log" | tail -1)"
done
