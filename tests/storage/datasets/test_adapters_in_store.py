"""Adapter records go into a DatasetStore unchanged: ids are valid, infos survive the JSON round trip."""

from __future__ import annotations

from anonymask.storage.datasets import get_adapter
from anonymask.storage.store import DatasetStore


def test_records_register_in_store(tmp_path, make_files):
    data = tmp_path / "data"
    make_files(
        "nturgb+d_rgb/S001C001P001R001A001_rgb.avi",
        "nturgb+d_skeletons/S001C001P001R001A001.skeleton",
        "nturgb+d_rgb/S002C002P002R001A055_rgb.avi",
        root=data / "ntu",
    )
    make_files("own/#1 (take 2)!.mp4", "own/sub/__init__.mov", ".x.mp4", root=data / "folder")
    for name in ("ntu", "folder"):
        adapter = get_adapter(name, data / name)
        infos = list(adapter.records())
        store = DatasetStore.create(str(tmp_path / f"{name}.zarr"), name, **{
            k: v for k, v in adapter.describe().items() if k in ("source", "classes", "splits")
        })  # fmt: skip
        store.register_videos(infos)
        assert store.video_ids() == sorted(i.video_id for i in infos)
        for info in infos:
            assert store.video(info.video_id).info == info
        assert store.classes == adapter.classes
