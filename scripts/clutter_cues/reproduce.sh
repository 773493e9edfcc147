#!/usr/bin/env bash
# The clutter-cue study (issue 27 item 3; docs/RESULTS.md, "cues that tell a person from clutter"),
# from the clips to the table:
#
#     scripts/clutter_cues/reproduce.sh WORK [CLIPS]
#
# CLIPS (default WORK/clips) holds the videos of scripts/clutter_cues/clips.tsv; missing ones are
# made there (the generated clips, the hard case, the Pose2Sim loops; the demo set must exist:
# `make demo` writes data/raw/demo). Per clip it writes to WORK:
#   <clip>.json        scripts/track_evidence.py --verdicts: discovery with the production settings,
#                      each raw track's evidence, verdict and per-frame boxes
#   cues_<clip>.json   cues.py: detector and pixel cues on sampled boxes, and the cost per call
#   crops_<clip>.png   crops.py: the sheet the Pose2Sim tracks were labelled from by eye
# then stillness.json (stillness.py) and table_250.md, table_150.md, table_0.md (rule_table.py,
# rules judged on tracks of at least 250 / 150 / 0 frames). An output that exists is kept (delete it
# to redo it). About 45 min on a 2-core VM; discovery dominates. PY overrides the interpreter.
set -euo pipefail
[ $# -ge 1 ] || { sed -n 2,17p "$0"; exit 2; }
mkdir -p "$1"
WORK=$(cd "$1" && pwd)
CLIPS=${2:-$WORK/clips}
mkdir -p "$CLIPS"
CLIPS=$(cd "$CLIPS" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/../.."
PY=${PY:-.venv/bin/python}
RUN="nice -n 10 $PY"
TABLE="$HERE/clips.tsv"

# the clips
if [ ! -e "$CLIPS/demo" ]; then
  [ -d data/raw/demo ] || { echo "data/raw/demo is missing: run 'make demo' first" >&2; exit 1; }
  ln -s "$(pwd)/data/raw/demo" "$CLIPS/demo"
fi
$PY - "$CLIPS" "$TABLE" <<'EOF'
import sys
from pathlib import Path

from anonymask.bench.scaling import loop_video, make_clip

clips = Path(sys.argv[1])
rows = [line.split("\t") for line in Path(sys.argv[2]).read_text().splitlines() if line and not line.startswith("#")]
for name, video, *_ in rows:
    path = clips / video
    if path.exists():
        continue
    print(f"[clips] making {path}", flush=True)
    if video.startswith(("c10/", "c60/")):
        make_clip(clips / video.split("/")[0], 1280, 720, int(video[1:3]))
    elif video.startswith("hard_raw/"):
        from anonymask.models.shared.synthetic.hard import generate_hard_cases

        generate_hard_cases(clips / "hard_raw", cases=(Path(video).stem.removeprefix("hard_"),))
    elif video.startswith("p2s_"):
        from anonymask.storage.datasets.sample import SampleDataset

        setname, cam, reps = Path(video).stem.removeprefix("p2s_").split("_")  # Multi, cam01, x3
        src = {vid: p for vid, _, p in SampleDataset()._videos()}[f"pose2sim_Demo_{setname}Person__videos__{cam}"]
        loop_video(src, path, int(reps.removeprefix("x")))
    if not path.exists():
        sys.exit(f"[clips] {name}: {path} was not made")
EOF

ALL=()
DUMPS=()
while IFS=$'\t' read -r name video gt role haar; do
  case "$name" in ''|'#'*) continue ;; esac
  ALL+=("$name")
  DUMPS+=("$WORK/$name.json")
  gtarg=()
  [ "$gt" != "-" ] && gtarg=(--gt "$CLIPS/$gt")
  echo "[$(date -u +%H:%M:%S)] $name ($role)"
  [ -e "$WORK/$name.json" ] ||
    $RUN scripts/track_evidence.py "$CLIPS/$video" "${gtarg[@]}" --verdicts --out "$WORK/$name.json"
  nohaar=()
  [ "$haar" = "no" ] && nohaar=(--no-haar)
  [ -e "$WORK/cues_$name.json" ] ||
    $RUN "$HERE/cues.py" "$WORK/$name.json" --out "$WORK/cues_$name.json" "${gtarg[@]}" "${nohaar[@]}"
  [ -e "$WORK/crops_$name.png" ] || $RUN "$HERE/crops.py" "$WORK/$name.json" "$WORK/crops_$name.png"
done < "$TABLE"

[ -e "$WORK/stillness.json" ] ||
  $RUN "$HERE/stillness.py" "${DUMPS[@]}" --out "$WORK/stillness.json"
for life in 250 150 0; do
  $PY "$HERE/rule_table.py" "$WORK" --min-life $life "${ALL[@]}" > "$WORK/table_$life.md"
done
echo "tables: $WORK/table_250.md (the study's), table_150.md, table_0.md"
