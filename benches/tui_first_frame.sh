#!/usr/bin/env bash
# Time to first frame and key-to-frame of the real release binary in tmux.
# usage: benches/tui_first_frame.sh DATASET [BIN]
#   DATASET e.g. from `python3 shared/bench/make_corpus.py DIR --tasks 2700` (~150k steps)
# Prints: first frame (list rows on screen), full load (summaries of every
# trajectory read), and the median of 20 key presses from send-keys to a changed
# screen. tmux round trips are included, so the figures are upper bounds.
set -euo pipefail
ds=$1
bin=${2:-${CARGO_TARGET_DIR:-target}/release/rmsweb}
sock=rmsweb-measure-$$
now() { date +%s%N; }
cap() { tmux -L "$sock" capture-pane -p -t m; }
trap 'tmux -L "$sock" kill-server 2>/dev/null || true' EXIT
t0=$(now)
tmux -L "$sock" new-session -d -s m -x 120 -y 40 "exec env RMSWEB_PICKER=halfblocks $bin --dataset $ds --annotator measure"
until cap | grep -q '✓\|✗'; do sleep 0.005; done
t1=$(now)
until ! cap | grep -q '· loading'; do sleep 0.01; done
t2=$(now)
echo "first frame: $(( (t1 - t0) / 1000000 )) ms"
echo "full load (all summaries): $(( (t2 - t0) / 1000000 )) ms"
lat=()
for i in $(seq 20); do
  before=$(cap)
  k=$([ $((i % 2)) = 0 ] && echo k || echo j)
  s=$(now)
  tmux -L "$sock" send-keys -t m "$k"
  while [ "$(cap)" = "$before" ]; do :; done
  lat+=($(( ($(now) - s) / 1000000 )))
done
sorted=$(printf '%s\n' "${lat[@]}" | sort -n)
echo "key-to-frame (j/k in the trajectory list, 20 presses): median $(echo "$sorted" | sed -n 10p) ms, max $(echo "$sorted" | tail -1) ms"
