import os

import numpy as np
import pytest
from scipy.ndimage import binary_erosion

from anonymask.models.shared.body.appearance import AppearanceBank
from anonymask.models.shared.body.model import get_body_model
from anonymask.models.shared.body.tracks import Camera, SMPLHTrack, upright_orient
from anonymask.models.shared.render.renderer import MeshSpec, get_renderer, render_sequence

W, H = 96, 72


@pytest.fixture(scope="module")
def model():
    return get_body_model("neutral")


@pytest.fixture(scope="module")
def cam():
    return Camera(70.0, 70.0, 47.5, 35.5, W, H)


def _box(x0, x1, y0, y1, z0, z1):
    v = np.array([[x, y, z] for x in (x0, x1) for y in (y0, y1) for z in (z0, z1)], float)
    # 12 outward-wound triangles of the cuboid (vertex index = 4*ix + 2*iy + iz)
    f = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
                  [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])
    return v, f


def _body(model, pelvis, yaw=0.0):
    tr = model.transl_for(np.zeros(10), pelvis)
    out = model.forward(np.zeros(10), upright_orient(yaw)[None], np.zeros((1, 63)), transl=tr[None])
    return out


def _spec(model, out, rgb=(200, 60, 40)):
    return MeshSpec(out.vertices[0], model.faces, np.tile(np.array(rgb, np.uint8), (model.num_vertices, 1)))


def test_box_lands_exactly_on_projected_pixels(cam):
    # front face chosen to project to u in [10.25, 30.75], v in [5.25, 20.75] (upper-left region)
    z = 2.0
    u0, u1, v0, v1 = 10.25, 30.75, 5.25, 20.75
    x0, x1 = (u0 - cam.cx) * z / cam.fx, (u1 - cam.cx) * z / cam.fx
    y0, y1 = (v0 - cam.cy) * z / cam.fy, (v1 - cam.cy) * z / cam.fy
    v, f = _box(x0, x1, y0, y1, z, z + 0.001)  # thin: its sides add < 0.01 px to the outline
    uv = cam.project(v[[0, 7]])
    assert np.allclose(uv[0], [u0, v0])
    out = get_renderer(W, H).render([MeshSpec(v, f, np.full((8, 3), 255, np.uint8))], cam)
    jj, ii = np.meshgrid(np.arange(W), np.arange(H))
    expected = (jj > u0) & (jj < u1) & (ii > v0) & (ii < v1)
    assert np.array_equal(out.masks[0], expected)
    assert np.allclose(out.depth[expected], z, atol=2e-3)
    assert (out.depth[~expected] == 0).all()


def test_single_body_outputs_are_consistent(model, cam):
    body = _body(model, [0.0, 0.0, 3.0])
    out = get_renderer(W, H).render([_spec(model, body)], cam)
    m = out.masks[0]
    assert out.rgb.shape == (H, W, 3) and out.rgb.dtype == np.uint8
    assert out.depth.dtype == np.float32 and out.masks.shape == (1, H, W)
    assert 200 < m.sum() < 0.5 * W * H
    assert (out.depth[m] > 2.5).all() and (out.depth[m] < 3.5).all()
    assert (out.depth[~m] == 0).all() and (out.rgb[~m] == 0).all()
    assert np.array_equal(out.person_ids >= 0, m) and (out.person_ids[m] == 0).all()
    # red body, shaded by the lights (not flat)
    rgb = out.rgb[m].astype(float)
    assert (rgb[:, 0] > rgb[:, 1]).mean() > 0.95
    assert rgb[:, 0].std() > 5
    # the nose (facing the camera) projects onto the mask at its own depth
    nose = body.keypoints[0, 0]
    u, v = np.round(cam.project(nose)).astype(int)
    assert m[v, u] and abs(out.depth[v, u] - nose[2]) < 0.03
    # the silhouette lies within the projected vertices' box and covers the box of the body
    # without its hands (fingers are thinner than a pixel at this size)
    hands = model.lbs_weights[:, [20, 21] + list(range(22, 52))].sum(1) > 0.5
    uv_all = cam.project(body.vertices[0][np.unique(model.faces)])
    uv_core = cam.project(body.vertices[0][~hands])
    rows, cols = np.where(m)
    assert uv_all[:, 1].min() - 1 <= rows.min() <= uv_core[:, 1].min() + 1
    assert uv_core[:, 1].max() - 1 <= rows.max() <= uv_all[:, 1].max() + 1
    assert uv_all[:, 0].min() - 1 <= cols.min() <= uv_core[:, 0].min() + 1
    assert uv_core[:, 0].max() - 1 <= cols.max() <= uv_all[:, 0].max() + 1


def test_two_bodies_nearer_one_wins(model, cam):
    r = get_renderer(W, H)
    near = _spec(model, _body(model, [-0.05, 0.0, 3.0]), (40, 200, 60))
    far = _spec(model, _body(model, [0.12, 0.0, 4.0]), (40, 60, 200))
    a, b = r.render([near], cam), r.render([far], cam)
    both = r.render([far, near], cam)  # order of the list must not matter for occlusion
    m_far, m_near = both.masks
    overlap = a.masks[0] & b.masks[0]
    assert overlap.sum() > 20
    assert not (m_far & m_near).any()
    assert np.array_equal(m_near, a.masks[0])
    assert np.array_equal(m_far, b.masks[0] & ~a.masks[0])
    assert (both.person_ids[m_near] == 1).all() and (both.person_ids[m_far] == 0).all()
    assert np.allclose(both.depth[overlap], a.depth[overlap])
    # green (near) wins in the overlap (edge pixels are anti-aliased with what is behind)
    inner = binary_erosion(overlap)
    assert m_far.sum() > 30 and inner.sum() > 5 and (both.rgb[inner][:, 1] > both.rgb[inner][:, 2]).all()


def test_a_depth_tie_goes_to_the_first_body_every_time(model, cam):
    """Two bodies in exactly the same place: every pixel is a depth tie. The owner must be the
    first body in the list, every time (pyrender alone orders meshes by iterating a set, so the
    owner of a tie pixel changed between runs and the same input gave different stores)."""
    r = get_renderer(W, H)
    body = _body(model, [0.0, 0.0, 3.0])
    for _ in range(8):  # fresh mesh nodes each frame: a set's order would vary among these
        out = r.render([_spec(model, body, (200, 0, 0)), _spec(model, body, (0, 0, 200))], cam)
        assert out.masks[0].sum() > 30 and not out.masks[1].any()
        assert (out.rgb[out.masks[0]][:, 0] >= out.rgb[out.masks[0]][:, 2]).all()


def test_resize_keeps_one_renderer(model, cam):
    r = get_renderer(W, H)
    spec = [_spec(model, _body(model, [0.0, 0.0, 3.0]))]
    first = r.render(spec, cam)
    small = Camera(35.0, 35.0, 23.5, 17.5, 48, 36)
    out = r.render(spec, small)
    assert out.rgb.shape == (36, 48, 3) and out.masks.shape == (1, 36, 48) and out.masks.sum() > 30
    assert get_renderer(48, 36) is r
    if not os.environ.get("ANONYMASK_RENDER_AA"):  # software GL skips the (costly) multisampling
        assert r.antialias == ("llvmpipe" not in r.gl_renderer.lower())
    again = r.render(spec, cam)
    assert np.array_equal(again.masks, first.masks) and np.array_equal(again.depth, first.depth)


def test_empty_scene_and_rgba_colours(model, cam):
    r = get_renderer(W, H)
    empty = r.render([], cam)
    assert empty.masks.shape == (0, H, W) and (empty.person_ids == -1).all() and not empty.rgb.any()
    body = _body(model, [0.0, 0.0, 3.0])
    rgba = MeshSpec(body.vertices[0], model.faces, np.tile(np.array([10, 10, 220, 128], np.uint8), (6890, 1)))
    out = r.render([rgba], cam)
    assert out.masks[0].sum() > 200 and (out.rgb[out.masks[0]][:, 2] > 60).all()


def test_render_sequence_skips_invalid_frames(model, cam):
    bank = AppearanceBank(4)
    t = 3
    tracks = []
    for k, x in enumerate((-0.4, 0.4)):
        tr = SMPLHTrack.rest(k, t)
        tr.global_orient[:] = upright_orient()
        tr.transl[:] = model.transl_for(tr.betas, [x, 0.0, 3.5 + k])
        tr.body_pose[:, 3 * 17 + 2] = np.linspace(0, 1.0, t)  # left elbow moves over time
        tracks.append(tr)
    tracks[1].valid[1] = False
    out = render_sequence(model, tracks, [bank.avatar(0), bank.avatar(1)], cam)
    assert out["rgb"].shape == (t, H, W, 3) and out["depth"].shape == (t, H, W)
    assert out["masks"].shape == (t, 2, H, W)
    assert out["masks"][:, 0].sum(axis=(1, 2)).min() > 100
    assert out["masks"][1, 1].sum() == 0 and out["masks"][0, 1].sum() > 100 and out["masks"][2, 1].sum() > 100
    assert not np.array_equal(out["masks"][0, 0], out["masks"][2, 0])  # the arm moved
    union = out["masks"].any(axis=1)
    assert ((out["depth"] > 0) == union).all()
    assert out["joints"].shape == (t, 2, 52, 3) and out["keypoints"].shape == (t, 2, 21, 3)
    assert np.isnan(out["joints"][1, 1]).all() and not np.isnan(out["joints"][[0, 2], 1]).any()
    posed = model.pose_track(tracks[0])
    assert np.allclose(out["joints"][:, 0], posed.joints) and np.allclose(out["keypoints"][:, 0], posed.keypoints)
    # the pelvis joint projects onto its own body's mask
    for f in range(t):
        u, v = np.round(cam.project(out["joints"][f, 0, 0])).astype(int)
        assert out["masks"][f, 0, v, u]


def test_vertex_shading_follows_the_lights():
    from anonymask.models.shared.render.renderer import shade_vertices

    pts = np.array([[0.0, 0.0, 3.0]] * 3)
    normals = np.array([[0.0, 0.0, -1.0], [0.0, 0.0, 1.0], [-0.35, -0.55, -1.0]])
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    col = shade_vertices(pts, normals, np.array([[180, 90, 40]] * 3, np.uint8))
    assert col[2].sum() > col[0].sum() > col[1].sum()  # facing the key light > the camera > away
    assert (col[:, 0] > col[:, 1]).all() and (col[:, 1] > col[:, 2]).all()  # hue is kept
    assert col.min() >= 0 and col.max() <= 1


def _render_in_child(queue, spec, cam):
    try:
        get_renderer(W, H).render([spec], cam)
        queue.put("rendered")
    except RuntimeError as err:
        queue.put(str(err))


def test_forked_child_gets_a_clear_error_not_a_hang(model, cam):
    import multiprocessing as mp

    spec = _spec(model, _body(model, [0.0, 0.0, 3.0]))
    here = int(get_renderer(W, H).render([spec], cam).masks[0].sum())  # parent context exists
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_render_in_child, args=(queue, spec, cam), daemon=True)
    proc.start()
    try:
        message = queue.get(timeout=30)
    finally:
        proc.join(timeout=5)
        if proc.is_alive():
            proc.kill()
    assert "spawn" in message
    assert int(get_renderer(W, H).render([spec], cam).masks[0].sum()) == here  # parent still fine


def test_a_failed_frame_leaves_nothing_behind(model, cam):
    r = get_renderer(W, H)
    good = _spec(model, _body(model, [0.0, 0.0, 3.0]))
    bad = MeshSpec(good.vertices, good.faces, np.zeros((3, 3), np.uint8))  # wrong colour count
    with pytest.raises(ValueError, match="body 1"):
        r.render([good, bad], cam)
    after = r.render([good], cam)
    assert after.masks.shape[0] == 1 and (after.person_ids <= 0).all()
    assert np.array_equal(after.masks[0], r.render([good], cam).masks[0])


def test_offsets_push_the_surface_out_along_its_normals(model, cam):
    """Clothes with volume (MeshSpec.offsets): zero offsets draw the body as posed; outward offsets
    widen its outline all round and bring its front nearer the camera; a wrong length is refused."""
    body = _body(model, [0.0, 0.0, 2.0])
    spec = _spec(model, body)
    r = get_renderer(W, H)
    bare = r.render([spec], cam)
    zero = r.render([MeshSpec(spec.vertices, spec.faces, spec.vertex_colors, np.zeros(model.num_vertices))], cam)
    assert np.array_equal(zero.masks, bare.masks) and np.array_equal(zero.rgb, bare.rgb)
    d = 0.03  # 1 px at this distance and focal length
    dressed = r.render([MeshSpec(spec.vertices, spec.faces, spec.vertex_colors,
                                 np.full(model.num_vertices, d, np.float32))], cam)
    m0, m1 = bare.masks[0], dressed.masks[0]
    assert (m0 & ~m1).sum() <= 2  # the old outline is inside the new one (to a rasterised pixel)
    assert m1.sum() > 1.2 * m0.sum()
    both = m0 & m1 & binary_erosion(m0, iterations=2)
    nearer = bare.depth[both] - dressed.depth[both]
    assert abs(np.median(nearer) - d) < 0.01
    with pytest.raises(ValueError, match="offsets"):
        r.render([MeshSpec(spec.vertices, spec.faces, spec.vertex_colors, np.zeros(5))], cam)
