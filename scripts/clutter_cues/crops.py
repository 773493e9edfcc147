"""A sheet of crops per raw discovery track (one row per track, 6 crops spread over its life), to
label by eye which tracks are people.

Pose2Sim's footage has no ground truth; the clutter-cue study labelled its tracks from these
sheets (a plastic anatomical skeleton and a mat with tape rolls turned out to be clutter; BY_EYE in
rule_table.py). Each crop is the track's box grown by 20% of its height on each side and 10% above
and below, scaled to 120 px high, captioned with the track's raw id and the frame.

    .venv/bin/python scripts/clutter_cues/crops.py WORK/CLIP.json WORK/crops_CLIP.png [--min-life N]

CLIP.json is ``scripts/track_evidence.py`` output (with per-frame ``boxes``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from track_evidence import read_video  # noqa: E402

TILE_H, TILE_W, PER_ROW = 140, 160, 6


def sheet(d: dict, min_life: int = 0) -> np.ndarray:
    """The RGB sheet of one track_evidence.py dump ``d``."""
    trs = [tr for tr in d["tracks"] if tr["last"] - tr["first"] + 1 >= min_life]
    want: dict[int, list] = {}
    for k, tr in enumerate(trs):
        bx = tr["boxes"]
        for i in np.linspace(0, len(bx) - 1, PER_ROW).astype(int):
            want.setdefault(bx[i][0], []).append((k, bx[i][1:5]))
    tiles: dict[int, list[np.ndarray]] = {}
    for t, fr in enumerate(read_video(d["video"], d["start"], d["start"] + d["frames"], d["max_side"] or None)):
        for k, b in want.get(t, []):
            x0, y0, x1, y1 = (int(round(v)) for v in b)
            h = y1 - y0
            x0, x1, y0, y1 = x0 - h // 5, x1 + h // 5, y0 - h // 10, y1 + h // 10
            H, W = fr.shape[:2]
            c = fr[max(0, y0):min(H, y1), max(0, x0):min(W, x1)]
            if c.size:
                c = cv2.resize(c, (int(120 * c.shape[1] / max(1, c.shape[0])) or 1, 120))
            else:
                c = np.zeros((120, 60, 3), np.uint8)
            c = c[:, :TILE_W]
            tile = np.zeros((TILE_H, TILE_W, 3), np.uint8)
            tile[:120, : c.shape[1]] = c
            cv2.putText(tile, f"{trs[k]['raw_id']} t{t}", (2, 135), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (255, 255, 0), 1)
            tiles.setdefault(k, []).append(tile)
    blank = np.zeros((TILE_H, TILE_W, 3), np.uint8)
    rows = [np.concatenate(tiles[k] + [blank] * (PER_ROW - len(tiles[k])), 1) for k in sorted(tiles)]
    return np.concatenate(rows, 0) if rows else np.zeros((TILE_H, TILE_W * PER_ROW, 3), np.uint8)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="A sheet of crops per raw discovery track, to label by eye which are people.")
    p.add_argument("dump", help="scripts/track_evidence.py output of one clip (with per-frame boxes)")
    p.add_argument("out", help="the sheet, PNG")
    p.add_argument("--min-life", type=int, default=0, help="only tracks this long (frames)")
    args = p.parse_args(argv)
    img = sheet(json.loads(Path(args.dump).read_text()), args.min_life)
    cv2.imwrite(args.out, cv2.cvtColor(img, cv2.COLOR_RGB2BGR))
    print(args.out, img.shape[1], "x", img.shape[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
