"""Offscreen rendering of posed bodies: shaded colour, metric depth, per-body visible masks.

One pyrender OffscreenRenderer (EGL) per process, resized through its viewport attributes:
re-creating EGL contexts in one process is fragile, so everything goes through ``get_renderer``.
Calls are serialised with a lock because a GL context is current in one thread at a time.

Geometry is given in the OpenCV camera frame (x right, y down, z forward, metres). The scene's
world frame IS that camera frame; the pyrender camera node carries the flip to OpenGL's
convention (y up, looking down -z), so vertices are never copied to convert them.

Shading is computed per vertex on the CPU (Lambert key/fill/rim lights fixed to the camera, a
little Blinn-Phong gloss, linear-light maths, sRGB out) and drawn with pyrender's FLAT shader.
On a software GL (llvmpipe) this is several times cheaper than pyrender's PBR fragment shader,
and a body of ~7k vertices looks the same. A second, segmentation pass gives per-body ids and
the depth, so masks and depth agree exactly.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from anonymask.core.environment import environment
from anonymask.models.shared.body.tracks import Camera

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
if not hasattr(np, "infty"):
    np.infty = np.inf  # pyrender still uses np.infty (removed in numpy 2)

import pyrender  # noqa: E402
import pyrender.renderer as _pyrender_renderer  # noqa: E402

# pyrender always allocates 4x multisampled framebuffers. On a software GL (llvmpipe) that
# doubles the cost of a frame, so the sample count goes through this switch (see Renderer).
_MSAA = {"samples": 4}
_ORIG_STORAGE_MS = _pyrender_renderer.glRenderbufferStorageMultisample


def _storage_multisample(target, samples, internal_format, width, height):
    return _ORIG_STORAGE_MS(target, _MSAA["samples"], internal_format, width, height)


_pyrender_renderer.glRenderbufferStorageMultisample = _storage_multisample

_CV_TO_GL = np.diag([1.0, -1.0, -1.0, 1.0])  # camera node pose: OpenCV world, OpenGL camera
Z_NEAR, Z_FAR = 0.05, 200.0


@dataclass
class MeshSpec:
    """One body to draw: camera-frame vertices, triangle faces, per-vertex uint8 colours, and
    optionally how far (metres) each vertex is pushed out along its normal before drawing
    (clothes and hair standing off the skin: ``appearance.surface_offsets``)."""

    vertices: np.ndarray  # (V, 3) float
    faces: np.ndarray  # (F, 3) int
    vertex_colors: np.ndarray  # (V, 3|4) uint8
    offsets: np.ndarray | None = None  # (V,) float metres, None: the body as posed


@dataclass
class RenderOutput:
    rgb: np.ndarray  # (H, W, 3) uint8, black where no body
    depth: np.ndarray  # (H, W) float32 metres along z, 0 where no body
    masks: np.ndarray  # (N, H, W) bool, visible pixels of each body after occlusion
    person_ids: np.ndarray  # (H, W) int16, -1 background else index into bodies


class _NormalCache:
    """Vertex normals as one sparse product (vertex-face incidence @ face normals), per topology."""

    def __init__(self) -> None:
        self._key: tuple | None = None
        self._faces: np.ndarray | None = None
        self._inc: sp.csr_matrix | None = None

    def normals(self, vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
        key = (faces.shape, vertices.shape[0], faces[:8].tobytes(), faces[-8:].tobytes())
        if key != self._key or self._faces is None or not np.array_equal(self._faces, faces):
            n_f = faces.shape[0]
            rows = faces.reshape(-1)
            cols = np.repeat(np.arange(n_f), 3)
            self._inc = sp.csr_matrix((np.ones(rows.shape[0], np.float32), (rows, cols)),
                                      shape=(vertices.shape[0], n_f))
            self._faces, self._key = faces.copy(), key
        v = vertices.astype(np.float32, copy=False)
        fn = np.cross(v[faces[:, 1]] - v[faces[:, 0]], v[faces[:, 2]] - v[faces[:, 0]])
        vn = self._inc @ fn
        vn /= np.maximum(np.linalg.norm(vn, axis=1, keepdims=True), 1e-12)
        return vn


_SRGB_TO_LINEAR = ((np.arange(256) / 255.0) ** 2.2).astype(np.float32)

# Lights fixed to the camera, OpenCV frame: unit vectors from the surface TOWARDS each light.
_LIGHTS = np.array([(-0.35, -0.55, -1.0), (0.6, -0.1, -1.0), (0.0, -0.3, 1.0)], np.float32)
_LIGHTS /= np.linalg.norm(_LIGHTS, axis=1, keepdims=True)
_LIGHT_GAIN = np.array([0.72, 0.30, 0.22], np.float32)  # key, fill, rim (behind, from above)
_AMBIENT = 0.20
_GLOSS = 0.025


def _albedo_linear(colors: np.ndarray) -> np.ndarray:
    """uint8 (or 0-1 float) sRGB colours -> linear albedo; alpha is dropped (bodies are opaque)."""
    c = np.asarray(colors)[:, :3]
    if c.dtype == np.uint8:
        return _SRGB_TO_LINEAR[c]
    return np.clip(c.astype(np.float32), 0.0, 1.0) ** 2.2


def shade_vertices(vertices: np.ndarray, normals: np.ndarray, colors: np.ndarray) -> np.ndarray:
    """(V, 3) float sRGB colours of lit vertices seen from a camera at the origin (OpenCV frame)."""
    albedo = _albedo_linear(colors)
    lambert = np.clip(normals @ _LIGHTS.T, 0.0, None)  # (V, 3 lights)
    light = _AMBIENT + lambert @ _LIGHT_GAIN
    view = -vertices / np.maximum(np.linalg.norm(vertices, axis=1, keepdims=True), 1e-9)
    half = _LIGHTS[0][None] + view
    half /= np.maximum(np.linalg.norm(half, axis=1, keepdims=True), 1e-9)
    spec = _GLOSS * np.clip(np.einsum("ij,ij->i", normals, half), 0.0, None) ** 24
    lin = albedo * light[:, None] + spec[:, None]
    return np.clip(lin, 0.0, 1.0) ** (1.0 / 2.2)


class Renderer:
    """Renders lists of MeshSpec through the process-wide OffscreenRenderer."""

    def __init__(self, width: int, height: int):
        self._lock = threading.RLock()
        self._normals: dict[int, _NormalCache] = {}
        try:
            self._offscreen = pyrender.OffscreenRenderer(int(width), int(height))
        except Exception as err:  # no EGL driver, no device, wrong PYOPENGL_PLATFORM...
            raise RuntimeError(
                f"renderer: cannot create an offscreen GL context (PYOPENGL_PLATFORM="
                f"{os.environ.get('PYOPENGL_PLATFORM')!r}): {err}. Headless rendering needs EGL "
                "(Debian/Ubuntu: libegl1 libegl-mesa0 libgl1-mesa-dri, or an NVIDIA driver)."
            ) from err
        self.gl_renderer = self._gl_renderer_name()
        mode = environment().render_aa  # auto: only on hardware GL
        software = any(k in self.gl_renderer.lower() for k in ("llvmpipe", "softpipe", "swrast"))
        self.antialias = (not software) if mode == "auto" else mode == "on"
        _MSAA["samples"] = 4 if self.antialias else 0
        self.width, self.height = int(width), int(height)
        self._scene = pyrender.Scene(bg_color=np.zeros(4), ambient_light=np.zeros(3))
        self._cam = pyrender.IntrinsicsCamera(500.0, 500.0, 0.0, 0.0, znear=Z_NEAR, zfar=Z_FAR)
        self._cam_node = self._scene.add(self._cam, pose=_CV_TO_GL)
        self._material = pyrender.MetallicRoughnessMaterial(baseColorFactor=(1.0, 1.0, 1.0, 1.0))
        self.pid = os.getpid()
        self._mesh_nodes: list[pyrender.Node] = []
        # Draw the bodies in their list order. pyrender orders meshes by their node's distance to
        # the camera (all bodies sit at the origin: a tie) and otherwise by iterating a set, so
        # where two bodies meet at equal depth the owner of the pixel changed from run to run.
        # In list order, with the depth test keeping the first fragment, the lower index wins.
        self._offscreen._renderer._sorted_mesh_nodes = lambda scene: list(self._mesh_nodes)

    def _gl_renderer_name(self) -> str:
        from OpenGL.GL import GL_RENDERER, glGetString

        platform = self._offscreen._platform
        platform.make_current()
        try:
            name = glGetString(GL_RENDERER)
        finally:
            platform.make_uncurrent()
        return name.decode() if isinstance(name, bytes) else str(name)

    # -- size ----------------------------------------------------------------------------------
    def resize(self, width: int, height: int) -> None:
        """Change the viewport (the EGL framebuffers are resized, the context is kept)."""
        if (int(width), int(height)) != (self.width, self.height):
            self._offscreen.viewport_width = int(width)
            self._offscreen.viewport_height = int(height)
            self.width, self.height = int(width), int(height)

    # -- render --------------------------------------------------------------------------------
    def render(self, bodies: list[MeshSpec], camera: Camera) -> RenderOutput:
        """Draw the bodies seen by camera (OpenCV frame); empty list -> empty outputs."""
        h, w = camera.height, camera.width
        if not bodies:
            return RenderOutput(np.zeros((h, w, 3), np.uint8), np.zeros((h, w), np.float32),
                                np.zeros((0, h, w), bool), np.full((h, w), -1, np.int16))
        with self._lock:
            self.resize(w, h)
            self._set_camera(camera)
            try:
                seg_map = self._set_bodies(bodies)
                color, _ = self._offscreen.render(self._scene, pyrender.RenderFlags.FLAT)
                seg, depth = self._offscreen.render(self._scene, pyrender.RenderFlags.SEG, seg_map)
            finally:  # a failed frame must not leave its bodies in the next one
                self._clear_bodies()
        if len(bodies) < 255:
            ids = seg[..., 0].astype(np.int16) - 1
        else:
            ids = ((seg[..., 0].astype(np.int32) | (seg[..., 1].astype(np.int32) << 8)) - 1).astype(np.int16)
        foreground = ids >= 0
        masks = ids[None] == np.arange(len(bodies), dtype=np.int16)[:, None, None]
        # (multiplying by the mask is ~10x faster than boolean-index assignment)
        depth = np.asarray(depth, dtype=np.float32) * foreground
        # Anti-aliased fringes outside every mask are dropped so rgb is exactly black there.
        rgb = color[..., :3] * foreground[..., None]
        return RenderOutput(rgb, depth, masks, ids)

    def _set_camera(self, camera: Camera) -> None:
        # pyrender's intrinsics use continuous coordinates (pixel i spans [i, i+1)); OpenCV's
        # integer coordinates are pixel centres, hence the half-pixel shift.
        self._cam.fx, self._cam.fy = camera.fx, camera.fy
        self._cam.cx, self._cam.cy = camera.cx + 0.5, camera.cy + 0.5

    def _set_bodies(self, bodies: list[MeshSpec]) -> dict:
        seg_map = {}
        for i, body in enumerate(bodies):
            v = np.asarray(body.vertices, dtype=np.float32)
            f = np.asarray(body.faces)
            n_col = np.asarray(body.vertex_colors).shape[0]
            if v.ndim != 2 or v.shape[1] != 3 or n_col != v.shape[0] or f.ndim != 2 or f.shape[1] != 3:
                raise ValueError(f"render: body {i} has vertices {v.shape}, faces {f.shape}, "
                                 f"{n_col} vertex colours (need (V,3), (F,3), V colours)")
            cache = self._normals.setdefault(f.shape[0], _NormalCache())
            normals = cache.normals(v, f)
            if body.offsets is not None:
                off = np.asarray(body.offsets, np.float32)
                if off.shape != (v.shape[0],):
                    raise ValueError(f"render: body {i} has {v.shape[0]} vertices but offsets {off.shape}")
                # an offset surface's normals are the body's own to well under a degree for a few cm
                v = v + normals * off[:, None]
            colors = shade_vertices(v, normals, body.vertex_colors)
            prim = pyrender.Primitive(positions=v, normals=normals, color_0=colors,
                                      indices=f.astype(np.uint32, copy=False), material=self._material,
                                      mode=pyrender.constants.GLTF.TRIANGLES)
            node = self._scene.add(pyrender.Mesh([prim]))
            self._mesh_nodes.append(node)
            code = i + 1
            seg_map[node] = np.array([code & 255, (code >> 8) & 255, 0], dtype=np.float64)
        return seg_map

    def _clear_bodies(self) -> None:
        for node in self._mesh_nodes:
            self._scene.remove_node(node)
        self._mesh_nodes = []


_RENDERER: Renderer | None = None
_CREATE_LOCK = threading.Lock()


def get_renderer(width: int = 640, height: int = 480) -> Renderer:
    """The process-wide renderer, resized to (width, height).

    EGL (and llvmpipe's worker threads) do not survive fork(): a child forked from a process
    that already rendered cannot render at all, so it gets a clear error instead of a hang. Start
    rendering workers with the 'spawn' or 'forkserver' method (or fork before the first render).
    """
    global _RENDERER
    with _CREATE_LOCK:
        if _RENDERER is not None and _RENDERER.pid != os.getpid():
            raise RuntimeError(
                f"renderer: process {os.getpid()} was forked from {_RENDERER.pid}, which already holds an "
                "EGL context; GL cannot be used after fork. Start workers with the 'spawn' (or "
                "'forkserver') multiprocessing method."
            )
        if _RENDERER is None:
            _RENDERER = Renderer(width, height)
        else:
            with _RENDERER._lock:
                _RENDERER.resize(width, height)
        return _RENDERER


def render_sequence(body_model, tracks: list, avatars: list, camera: Camera,
                    offsets: list | None = None) -> dict[str, np.ndarray]:
    """Render T frames of several tracks: rgb (T,H,W,3), depth (T,H,W), masks (T,N,H,W).

    tracks[i] is drawn with avatars[i] (and ``offsets[i]``, see :class:`MeshSpec`); a track whose
    valid[t] is False is left out of frame t
    (its mask there is empty). All tracks must have the same number of frames. Also returns the
    posed ``joints`` (T,N,52,3) and ``keypoints`` (T,N,21,3, KEYPOINT_NAMES) in the camera frame,
    NaN where a track is not valid, so callers need not pose the bodies a second time.
    """
    if len(tracks) != len(avatars):
        raise ValueError(f"render_sequence: {len(tracks)} tracks but {len(avatars)} avatars")
    if offsets is None:
        offsets = [None] * len(tracks)
    if len(offsets) != len(tracks):
        raise ValueError(f"render_sequence: {len(tracks)} tracks but {len(offsets)} offsets")
    n = len(tracks)
    t = tracks[0].num_frames if tracks else 0
    for tr in tracks:
        if tr.num_frames != t:
            raise ValueError(f"render_sequence: track {tr.track_id} has {tr.num_frames} frames, expected {t}")
    h, w = camera.height, camera.width
    rgb = np.zeros((t, h, w, 3), np.uint8)
    depth = np.zeros((t, h, w), np.float32)
    masks = np.zeros((t, n, h, w), bool)
    joints = np.full((t, n, 52, 3), np.nan, np.float32)
    keypoints = np.full((t, n, 21, 3), np.nan, np.float32)
    out = {"rgb": rgb, "depth": depth, "masks": masks, "joints": joints, "keypoints": keypoints}
    if t == 0 or n == 0:
        return out
    renderer = get_renderer(w, h)
    # The track's own betas shape the body (the caller chooses them, e.g. an avatar's betas);
    # the avatar supplies the colours.
    posed = []
    for i, tr in enumerate(tracks):
        body = body_model.pose_track(tr)
        joints[tr.valid, i] = body.joints[tr.valid]
        keypoints[tr.valid, i] = body.keypoints[tr.valid]
        posed.append(body.vertices)
    faces = body_model.faces
    for f in range(t):
        present = [i for i in range(n) if tracks[i].valid[f]]
        if not present:
            continue
        specs = [MeshSpec(posed[i][f], faces, avatars[i].vertex_colors, offsets[i]) for i in present]
        res = renderer.render(specs, camera)
        rgb[f], depth[f] = res.rgb, res.depth
        for k, i in enumerate(present):
            masks[f, i] = res.masks[k]
    return out
