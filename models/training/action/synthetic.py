"""An easy synthetic action dataset store, for tests and benchmarks of the training path.

Each video shows a textured background and one moving "person" blob; the class decides the
blob's colour and direction of motion, so a tiny model learns it in a few epochs. The store holds
the arrays the anonymization flow writes: ``raw``, ``merged`` (blob redrawn as a flat "avatar"),
``anonymized`` (the avatar with a little "refinement" noise), ``public_mask`` (r: the avatar's
pixels) and ``person_mask`` (q: the blob grown by 2 pixels, soft edge, uint8 0..255).
"""

from __future__ import annotations

import os

import numpy as np

from anonymask.storage.store import DatasetStore, VideoInfo

_COLORS = np.array(
    [[230, 40, 40], [40, 220, 60], [50, 70, 240], [230, 220, 40], [200, 60, 220], [40, 220, 220]],
    dtype=np.float32,
)


def _video(label: int, frames: int, h: int, w: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    yy, xx = np.mgrid[0:h, 0:w]
    bg = rng.integers(40, 120, size=(h, w, 3)).astype(np.float32)
    angle = 2 * np.pi * label / 6 + rng.normal(0, 0.15)
    speed = 0.4 * min(h, w) / max(frames, 1)
    cy, cx = h / 2 + rng.normal(0, h / 10), w / 2 + rng.normal(0, w / 10)
    radius = max(min(h, w) / 4, 2.5)
    color = _COLORS[label % len(_COLORS)]
    raw = np.empty((frames, h, w, 3), np.uint8)
    merged = np.empty_like(raw)
    public = np.zeros((frames, h, w), bool)
    person = np.zeros((frames, h, w), np.uint8)
    for t in range(frames):
        py = cy + np.sin(angle) * speed * (t - frames / 2)
        px = cx + np.cos(angle) * speed * (t - frames / 2)
        d = np.sqrt((yy - py) ** 2 + (xx - px) ** 2)
        blob = d <= radius
        texture = rng.normal(0, 25, size=(h, w, 1))
        frame = bg.copy()
        frame[blob] = np.clip(color + texture[blob], 0, 255)
        raw[t] = frame.astype(np.uint8)
        avatar = bg.copy()
        avatar[blob] = color * 0.9
        merged[t] = avatar.astype(np.uint8)
        public[t] = blob
        person[t] = np.clip((radius + 2.0 + 1.0 - d) / 1.0, 0, 1) * 255
    anonymized = np.clip(merged.astype(np.int16) + rng.integers(-3, 4, size=merged.shape), 0, 255)
    return {
        "raw": raw,
        "merged": merged,
        "anonymized": anonymized.astype(np.uint8),
        "public_mask": public,
        "person_mask": person,
    }


def make_synthetic_store(
    url: str,
    *,
    num_classes: int = 3,
    videos_per_class: dict[str, int] | None = None,
    frames: int = 20,
    size: tuple[int, int] = (32, 32),
    protocol: str = "xsub",
    seed: int = 0,
    workers: int = 1,
) -> DatasetStore:
    """Create (overwrite) a store with ``videos_per_class[split]`` videos per class and split.

    ``workers`` > 1 draws and writes the videos in that many spawned processes (each video its own
    group, so one writer per array); each video then has its own seed ``(seed, index)``, so the
    pixels differ from the serial build's, the store's layout and labels do not.
    """
    if not 1 <= num_classes <= len(_COLORS):
        raise ValueError(f"num_classes must be 1..{len(_COLORS)}")
    videos_per_class = videos_per_class or {"train": 4, "test": 2}
    store = DatasetStore.create(
        url,
        "synthetic_actions",
        classes=[f"action{k}" for k in range(num_classes)],
        splits=[protocol],
        overwrite=True,
    )
    if workers > 1:
        infos = [
            VideoInfo(video_id=f"{split}_c{k}_v{i}", label=k, label_name=f"action{k}", split={protocol: split})
            for split, n in videos_per_class.items()
            for k in range(num_classes)
            for i in range(n)
        ]
        store.register_videos(infos)
        _write_parallel(url, [(i, info.video_id, info.label) for i, info in enumerate(infos)], frames, size,
                        seed, workers)  # fmt: skip
        return store
    rng = np.random.default_rng(seed)
    infos, arrays = [], {}
    for split, n in videos_per_class.items():
        for k in range(num_classes):
            for i in range(n):
                vid = f"{split}_c{k}_v{i}"
                infos.append(VideoInfo(video_id=vid, label=k, label_name=f"action{k}", split={protocol: split}))
                arrays[vid] = _video(k, frames, size[0], size[1], rng)
    store.register_videos(infos)
    for vid, arrs in arrays.items():
        entry = store.video(vid)
        for name, data in arrs.items():
            entry.write_array(name, data)
        entry.update_attrs(frames=frames, fps=25.0)
    return store


def _write_videos(url: str, jobs: list[tuple[int, str, int]], frames: int, size: tuple[int, int], seed: int) -> int:
    """Draw and write the videos ``jobs`` = [(index, video_id, label)] into the store at ``url``."""
    store = DatasetStore.open(url)
    for index, vid, label in jobs:
        entry = store.video(vid)
        for name, data in _video(label, frames, size[0], size[1], np.random.default_rng([seed, index])).items():
            entry.write_array(name, data)
        entry.update_attrs(frames=frames, fps=25.0)
    return len(jobs)


def _write_parallel(url: str, jobs: list[tuple[int, str, int]], frames: int, size: tuple[int, int], seed: int,
                    workers: int) -> None:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    workers = max(1, min(int(workers), len(jobs), os.cpu_count() or 1))
    parts = [jobs[i::workers] for i in range(workers)]
    # spawn: zarr v3 runs an event-loop thread that a forked child must not inherit
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        done = sum(pool.map(_write_videos, [url] * workers, parts, [frames] * workers, [tuple(size)] * workers,
                            [seed] * workers))  # fmt: skip
    if done != len(jobs):
        raise RuntimeError(f"wrote {done} of {len(jobs)} synthetic videos")
