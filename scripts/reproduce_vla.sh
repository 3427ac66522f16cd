#!/usr/bin/env bash
# Reproduce the shipped reference VLA (edge/vla/checkpoints/stack) from nothing, timing each step:
# the recordings (two chains in parallel, one per core), training stages 1-9 with both cores
# (threads=0), DAgger round 1 from stage 4, the scene dataset, DAgger round 2 from stage 7, rounds
# 3 and 4 from stage 8 (recordings in parallel). The commands are docs/vla.md's recipe; the run
# directories and data go under OUT (default: repro/), the wall time of every step to
# OUT/timing.jsonl and the total to OUT/timing.json.
#
#   scripts/reproduce_vla.sh [OUT]          # the real recipe (~1.5-3 h on 2 cores; see docs/vla.md)
#   scripts/reproduce_vla.sh --smoke [OUT]  # every command on a few episodes/steps (~3 min, tiny
#                                           # model): checks the chain, not the result
#
# Interrupted? Run the same command again: finished recordings are kept, training resumes from
# its last save (--resume), finished stages are skipped.
set -euo pipefail
SMOKE=0
if [[ "${1:-}" == "--smoke" ]]; then SMOKE=1; shift; fi
OUT=${1:-repro}
mkdir -p "$OUT/data" "$OUT/runs"
export MUJOCO_GL=${MUJOCO_GL:-egl}
[[ -x .venv/bin/edge ]] && export PATH="$PWD/.venv/bin:$PATH"   # make setup's venv, if run from the repo
D=$OUT/data R=$OUT/runs

if (( SMOKE )); then
  n() { echo 6; }                              # episodes per recording
  s() { echo 4; }                              # optimiser / pre-training steps per stage
  EXTRA=(--preset tiny --eval-episodes 0)
else
  n() { echo "$1"; }
  s() { echo "$1"; }
  EXTRA=()
fi

step() {  # step NAME CMD...: run CMD, append its wall time to timing.jsonl
  local name=$1; shift
  local t0; t0=$(date +%s.%N)
  echo "== $name: $*" >&2
  "$@"
  python3 -c "import json,sys; print(json.dumps({'step': sys.argv[1], 'wall_s': round(float(sys.argv[3]) - float(sys.argv[2]), 1)}))" \
    "$name" "$t0" "$(date +%s.%N)" >> "$OUT/timing.jsonl"
}

train() {  # train NAME OUTDIR ARGS...: a training stage, skipped when complete, resumed when started
  local name=$1 dir=$2; shift 2
  if [[ -f $dir/manifest.json ]] && python3 -c "import json,sys; sys.exit(not json.load(open(sys.argv[1])).get('complete'))" "$dir/manifest.json"; then
    echo "== $name: $dir is complete, skipped" >&2; return
  fi
  local resume=(); [[ -f $dir/train_state.pt ]] && resume=(--resume)
  step "$name" edge train vla --task stack --out "$dir" "${resume[@]}" "$@" "${EXTRA[@]}"
}

rec() { edge data record --task stack --sim mujoco --wrist "$@"; }
: > "$OUT/timing.jsonl"
T0=$(date +%s)

# recordings: the via-point demos and the via-point-free demos, one chain per core
( step record_viapoint bash -c "$(declare -f rec); \
    rec --episodes $(n 320) --out $D/stack_mj && \
    rec --episodes $(n 320) --seed 5000 --out $D/stack_mj_dart --action-noise 0.01 && \
    rec --episodes $(n 240) --seed 9000 --out $D/stack_mj_dart3 --action-noise 0.03" ) &
VIA_PID=$!
( step record_direct bash -c "$(declare -f rec); \
    rec --episodes $(n 320) --seed 20000 --out $D/stack_mj_direct --approach-offset 0 && \
    rec --episodes $(n 320) --seed 25000 --out $D/stack_mj_direct_dart --approach-offset 0 --action-noise 0.01 && \
    rec --episodes $(n 240) --seed 29000 --out $D/stack_mj_direct_dart3 --approach-offset 0 --action-noise 0.03 && \
    { [ -f $D/stack_scenes/meta.json ] || { rm -rf $D/stack_scenes && edge data scenes --task stack --sim mujoco --episodes $(n 20000) --seed 7000000 --out $D/stack_scenes; }; }" ) &
DIRECT_PID=$!
wait $VIA_PID
wait $DIRECT_PID

V=(--set "model.cameras=[front,wrist]"
   --set "model.ignore_proprio=[qd0_rad_s,qd1_rad_s,qd2_rad_s,qd3_rad_s,qd4_rad_s,qd5_rad_s,qd6_rad_s]"
   --set model.aux_source=front --set model.object_token=true --set aux_object_weight=1
   --set vision_freeze=true --set save_every_steps=250 --set threads=0)
VIA=("$D/stack_mj" "$D/stack_mj_dart" "$D/stack_mj_dart3")
DIRECT=("$D/stack_mj_direct" "$D/stack_mj_direct_dart" "$D/stack_mj_direct_dart3")
WT=(--set model.wrist_token=true --set "shift_cameras=[]")

train stage1 "$R/vla_stack_frozen" --data "$D/stack_mj" "$D/stack_mj_dart" --steps "$(s 3500)" \
  --eval-every 1000 --eval-episodes 10 --set vision_pretrain_steps="$(s 3000)" --set warmup_steps=300 "${V[@]}"
train stage2 "$R/vla_stack_ft" --data "${VIA[@]}" --init "$R/vla_stack_frozen" --steps "$(s 2000)" \
  --eval-every 0 --eval-episodes 10 --set warmup_steps=100 "${V[@]}"
train stage3 "$R/vla_stack_wt" --data "${VIA[@]}" --init "$R/vla_stack_ft" --steps "$(s 2500)" \
  --eval-every 0 --eval-episodes 10 --set vision_pretrain_steps="$(s 2000)" "${WT[@]}" --set warmup_steps=100 "${V[@]}"
train stage4 "$R/vla_stack_direct" --data "${DIRECT[@]}" --init "$R/vla_stack_wt" --steps "$(s 2500)" \
  --eval-every 0 --eval-episodes 10 "${WT[@]}" --set warmup_steps=100 "${V[@]}"
train stage5 "$R/vla_stack_base" --data "${DIRECT[@]}" --init "$R/vla_stack_direct" --steps "$(s 2500)" \
  --eval-every 0 --eval-episodes 10 --set vision_pretrain_steps="$(s 2000)" \
  --set vision_pretrain_base_after_lift=true "${WT[@]}" --set warmup_steps=100 "${V[@]}"
step dagger1 edge data record --task stack --sim mujoco --wrist --episodes "$(n 300)" --seed 3000000 \
  --out "$D/stack_mj_dagger1" --approach-offset 0 --dagger "$R/vla_stack_direct" --expert-mix 0.2
train stage6 "$R/vla_stack_dagger1" --data "${DIRECT[@]}" "$D/stack_mj_dagger1" --init "$R/vla_stack_base" \
  --steps "$(s 3000)" --eval-every 0 --eval-episodes 10 "${WT[@]}" --set warmup_steps=100 "${V[@]}"
# stage 7: scene memory: the scene locator on the drawn scenes, then the policy with the memory
train stage7 "$R/vla_stack_scene" --data "${DIRECT[@]}" "$D/stack_mj_dagger1" --init "$R/vla_stack_dagger1" \
  --steps "$(s 3000)" --eval-every 0 --eval-episodes 10 --set model.scene_memory=true \
  --set "scene_data=[$D/stack_scenes]" --set locator_steps="$(s 6000)" "${WT[@]}" --set warmup_steps=100 "${V[@]}"
# DAgger round 2 from stage 7, two halves in parallel (one per core)
dag2() { edge data record --task stack --sim mujoco --wrist --episodes "$(n 150)" --seed "$1" \
  --out "$D/stack_mj_daggerS_$2" --approach-offset 0 --dagger "$R/vla_stack_scene" --expert-mix 0.2; }
step dagger2 bash -c "$(declare -f n dag2); D=$D R=$R; dag2 3500000 a & A=\$!; dag2 3500150 b & B=\$!; wait \$A && wait \$B"
# stage 8 (shipped until 2026-12-01 late evening)
train stage8 "$R/vla_stack_scene_dagger" --data "${DIRECT[@]}" "$D/stack_mj_dagger1" "$D/stack_mj_daggerS_a" \
  "$D/stack_mj_daggerS_b" --init "$R/vla_stack_scene" --steps "$(s 3000)" --eval-every 0 --eval-episodes 0 \
  --set model.scene_memory=true "${WT[@]}" --set warmup_steps=100 "${V[@]}"
# DAgger rounds 3 and 4 from stage 8, labelled by the expert that places the held block's centre
# (round 4 also reopens grasps closed > 1 cm off the block's centre along the fingers); one per core
dag3() { edge data record --task stack --sim mujoco --wrist --episodes "$(n "$1")" --seed "$2" \
  --out "$D/stack_mj_dagger3h_$3" --approach-offset 0 --place-held-object \
  --dagger "$R/vla_stack_scene_dagger" --expert-mix 0.2; }
dag4() { edge data record --task stack --sim mujoco --wrist --episodes "$(n 109)" --seed "$1" \
  --out "$D/stack_mj_daggerR_$2" --approach-offset 0 --place-held-object --regrasp-off-centre 0.01 \
  --dagger "$R/vla_stack_scene_dagger" --expert-mix 0.2; }
step dagger3_4 bash -c "$(declare -f n dag3 dag4); D=$D R=$R; \
  { dag3 300 3600000 a && dag4 3800000 a; } & A=\$!; \
  { dag3 150 3600300 b && dag3 150 3600450 c && dag4 3800300 b; } & B=\$!; wait \$A && wait \$B"
# stage 9 = the shipped checkpoint: the wrist localiser re-trained alone on all of it (it now sees
# the policy's off-centre grasps), the moved block's first-frame memory in the token, then the policy
train stage9 "$R/vla_stack_s11wrist" --data "${DIRECT[@]}" "$D/stack_mj_dagger3h_a" "$D/stack_mj_dagger3h_b" \
  "$D/stack_mj_dagger3h_c" "$D/stack_mj_daggerR_a" "$D/stack_mj_daggerR_b" --init "$R/vla_stack_scene_dagger" \
  --steps "$(s 3000)" --eval-every 0 --eval-episodes 0 --set model.scene_memory=true "${WT[@]}" \
  --set warmup_steps=100 --set model.scene_memory_moved=true --set vision_pretrain_steps="$(s 2000)" \
  --set "vision_pretrain_parts=[wrist]" "${V[@]}"

python3 - "$OUT" "$T0" <<'EOF'
import json, sys, time
from pathlib import Path
out, t0 = Path(sys.argv[1]), float(sys.argv[2])
steps = [json.loads(line) for line in (out / "timing.jsonl").read_text().splitlines() if line.strip()]
try:
    from edge.telemetry import machine_info
    machine = machine_info()
except ImportError:
    machine = None
total = {"total_wall_s": round(time.time() - t0, 1), "steps": steps,
         "budget_s": 7200, "within_budget": time.time() - t0 <= 7200,
         "command": f"scripts/reproduce_vla.sh {out}", "machine": machine}
(out / "timing.json").write_text(json.dumps(total, indent=2) + "\n")
print(f"reproduced in {total['total_wall_s'] / 60:.1f} min (budget 120 min); "
      f"final model {out / 'runs' / 'vla_stack_s11wrist'}; per step: {out / 'timing.json'}")
EOF
