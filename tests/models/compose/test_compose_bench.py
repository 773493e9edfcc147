from anonymask.bench.compose import bench_offline_stages


def test_bench_offline_stages_reports_every_stage():
    res = bench_offline_stages(T=4, H=120, W=160, crop_size=32)
    expected = {"unflicker", "grow", "feather", "inpaint_temporal_median", "inpaint_opencv", "merge",
                "tubelets", "crop", "reintegrate", "public_mask"}
    assert set(res["stages"]) == expected
    assert all(s["fps"] > 0 and s["seconds"] >= 0 for s in res["stages"].values())
    assert (res["frames"], res["height"], res["width"]) == (4, 120, 160)
