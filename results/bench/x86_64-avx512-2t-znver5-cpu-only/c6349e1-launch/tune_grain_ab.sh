#!/bin/bash
# tune of four 2^24 cases (8 trials, scratch journals, no freeze) with the finalists timed run by
# run and launch by launch, alternating which goes first; prints each decision's gate readings.
# Run from a checkout: PYTHONPATH=. bash tune_grain_ab.sh LOSSTUNE OUTDIR
L=$1; O=$2; mkdir -p "$O"
n=0
for c in "--op l1 --dtype bfloat16 --reduction none" "--op kl_div-log --dtype bfloat16 --reduction mean" "--op mse --dtype float16 --reduction mean" "--op kl_div --dtype float32 --reduction none"; do
  if [ $((n % 2)) = 0 ]; then gs="run launch"; else gs="launch run"; fi
  for g in $gs; do
    $L tune $c --shape 2^24 --trials 8 --grain $g --storage "$O/j-$n-$g.log" --json --no-progress > "$O/t-$n-$g.json" 2> "$O/t-$n-$g.err"
    python3 - "$O/t-$n-$g.json" "$c" "$g" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))[0]
f = lambda v: "-" if v is None else (f"{min(v):.3f}-{max(v):.3f}" if isinstance(v, list) else f"{v:.3f}" if isinstance(v, float) else str(v))
print(f"{sys.argv[2]}  {sys.argv[3]}  baseline={r['baseline']}  switched={r['switched']}  confirmed={r['confirmed']}  chance={f(r['chance'])}  ratios={f(r['round_ratios'])}  control={f(r['control_ratios'])}  confirm={f(r['confirm_ratios'])}  best_gain={r['best_candidate_gain']:.3f}")
PY
  done
  n=$((n + 1))
done
