"""The SMPL-H body model: real files when the user has them, the procedural one otherwise.

``ANONYMASK_SMPLH_DIR`` names a folder with the licensed SMPL-H files (``SMPLH_NEUTRAL.npz``,
``SMPLH_MALE.npz``, ``SMPLH_FEMALE.npz``; ``.pkl``, a ``smplh/`` subfolder or AMASS's
``<gender>/model.npz`` also work). Without it the procedural model (procedural.py) is generated
once into ``$ANONYMASK_CACHE/body`` (default ``~/.cache/anonymask``) and loaded through the same
smplx code.

Hand poses are absolute (flat_hand_mean=True): zero is a flat open hand with either file, so a
pose means the same thing whichever model renders it. ``relaxed_hand_pose`` gives natural fingers.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from anonymask.core.environment import environment, variable
from anonymask.core.errors import MissingWeightsError

from .procedural import FORMAT_VERSION, write_model_file
from .tracks import GENDERS, NUM_BETAS, NUM_JOINTS, SMPLHTrack

ENV_SMPLH_DIR = variable("smplh_dir")
_CHUNK = 128  # frames per smplx call: bounds the (T, V, 4, 4) skinning transforms in memory


class BodyModelFilesError(MissingWeightsError):
    """ANONYMASK_SMPLH_DIR is set but does not hold the SMPL-H file a gender needs."""

    def __init__(self, folder: Path, gender: str, tried: list[str]):
        self.model = "SMPL-H"
        self.missing = tried
        self.folder = str(folder)
        Exception.__init__(
            self,
            f"SMPL-H {gender} model not found in {ENV_SMPLH_DIR}={folder}: looked for "
            f"{', '.join(tried)}. Put the licensed files there (https://mano.is.tue.mpg.de), or unset "
            f"{ENV_SMPLH_DIR} to use the procedural body model.",
        )


def cache_dir() -> Path:
    return environment().cache or Path.home() / ".cache" / "anonymask"


def _candidates(folder: Path, gender: str) -> list[Path]:
    g = gender.upper()
    return [folder / f"SMPLH_{g}.npz", folder / f"SMPLH_{g}.pkl", folder / "smplh" / f"SMPLH_{g}.npz",
            folder / "smplh" / f"SMPLH_{g}.pkl", folder / gender.lower() / "model.npz"]


_GEN_LOCK = threading.Lock()


def resolve_model_file(model_dir: str | os.PathLike | None = None, gender: str = "neutral") -> tuple[Path, bool]:
    """(path of the SMPL-H file to load, whether it is the procedural one).

    model_dir (or ANONYMASK_SMPLH_DIR) must hold a real file; without either the procedural file
    is generated into the cache on first use.
    """
    if gender not in GENDERS:
        raise ValueError(f"gender {gender!r} not in {GENDERS}")
    folder = model_dir if model_dir is not None else environment().smplh_dir
    if folder is not None:
        folder = Path(folder).expanduser()
        cands = _candidates(folder, gender)
        for c in cands:
            if c.is_file():
                return c, False
        raise BodyModelFilesError(folder, gender, [str(c.relative_to(folder)) for c in cands])
    out = cache_dir() / "body" / f"procedural_v{FORMAT_VERSION}"
    path = out / f"SMPLH_{gender.upper()}.npz"
    with _GEN_LOCK:
        if not path.is_file():
            write_model_file(out, gender)
    return path, True


@dataclass
class BodyOutput:
    """Posed bodies in the caller's (camera) frame."""

    vertices: np.ndarray  # (T, V, 3) float32
    joints: np.ndarray  # (T, 52, 3) float32
    keypoints: np.ndarray  # (T, 21, 3) float32: KEYPOINT_NAMES (nose, eyes, ears, toes, heels, tips)


def relaxed_hand_pose(side: str = "left") -> np.ndarray:
    """(45,) axis-angle of a gently curled hand, a natural default when fingers are unknown."""
    pose = np.zeros((15, 3), dtype=np.float32)
    for f in range(4):  # index, middle, pinky, ring bend down towards the palm (about -z on the left)
        pose[3 * f: 3 * f + 3, 2] = (-0.30, -0.35, -0.25)
    pose[12:15, 1] = (0.20, 0.15, 0.10)  # thumb
    if side == "right":
        pose[:, 1:] *= -1.0  # mirror about the body's sagittal plane
    return pose.reshape(-1)


_THREADS_LOCK = threading.Lock()
_THREADS = {"active": 0, "saved": 1}


def _single_thread_enter() -> None:
    """torch's thread count is process-wide: switch it once for overlapping callers (threads)."""
    with _THREADS_LOCK:
        if _THREADS["active"] == 0:
            _THREADS["saved"] = torch.get_num_threads()
            torch.set_num_threads(1)
        _THREADS["active"] += 1


def _single_thread_exit() -> None:
    with _THREADS_LOCK:
        _THREADS["active"] -= 1
        if _THREADS["active"] == 0:
            torch.set_num_threads(_THREADS["saved"])


class BodyModel:
    """SMPL-H forward kinematics and skinning for batches of frames (numpy in, numpy out)."""

    def __init__(self, model_dir: str | os.PathLike | None = None, gender: str = "neutral",
                 device: str = "cpu"):
        import smplx

        self.gender = gender
        self.device = torch.device(device)
        self.path, self.procedural = resolve_model_file(model_dir, gender)
        ext = self.path.suffix.lstrip(".")
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # smplx prints a warning about 16 betas
                self._smplx = smplx.SMPLH(
                    model_path=str(self.path), ext=ext, gender=gender, use_pca=False, flat_hand_mean=True,
                    num_betas=NUM_BETAS, batch_size=1,
                ).to(self.device)
        except ModuleNotFoundError as err:  # the MANO site's .pkl files pickle chumpy objects
            raise ValueError(
                f"{self.path}: cannot load this SMPL-H file ({err}). Files that need chumpy must be "
                "converted to .npz first (numpy arrays with the same keys), then named SMPLH_<GENDER>.npz."
            ) from err
        self._smplx.eval()
        self.faces = np.asarray(self._smplx.faces, dtype=np.int64)
        self.num_vertices = int(self._smplx.v_template.shape[0])
        self.lbs_weights = self._smplx.lbs_weights.detach().cpu().numpy().astype(np.float32)
        self.v_template = self._smplx.v_template.detach().cpu().numpy().astype(np.float32)
        self._zero_posedirs = not bool(self._smplx.posedirs.abs().max() > 0)

    # -- forward ------------------------------------------------------------------------------
    def forward(self, betas, global_orient, body_pose, left_hand_pose=None, right_hand_pose=None,
                transl=None) -> BodyOutput:
        """Pose T frames. betas (10,) or (T, 10); poses axis-angle (T, 3/63/45/45); transl (T, 3)."""
        go = np.asarray(global_orient, dtype=np.float32).reshape(-1, 3)
        t = go.shape[0]
        bp = np.asarray(body_pose, dtype=np.float32).reshape(t, 63)
        zeros45 = np.zeros((t, 45), np.float32)
        lh = zeros45 if left_hand_pose is None else np.asarray(left_hand_pose, np.float32).reshape(t, 45)
        rh = zeros45 if right_hand_pose is None else np.asarray(right_hand_pose, np.float32).reshape(t, 45)
        tr = np.zeros((t, 3), np.float32) if transl is None else np.asarray(transl, np.float32).reshape(t, 3)
        be = np.asarray(betas, dtype=np.float32)
        be = np.broadcast_to(be.reshape(1, -1) if be.ndim == 1 else be, (t, be.shape[-1]))
        be = np.pad(be, ((0, 0), (0, max(0, NUM_BETAS - be.shape[1]))))[:, :NUM_BETAS]
        verts = np.empty((t, self.num_vertices, 3), np.float32)
        joints = np.empty((t, NUM_JOINTS, 3), np.float32)
        keyp = np.empty((t, 21, 3), np.float32)
        # On the CPU always one intra-op thread: a multi-threaded GEMM rounds differently (up to 2
        # ulp here) with each thread count, and the poses reach every stored pixel of the render, so
        # a store computed with 2 threads and repaired with 1 (or by a Dask worker, which gets 1)
        # was not bit-identical (issue 32). One thread is also the faster here (8 frames: 7 ms vs
        # 160 ms with 2 threads; 256 frames: 0.43 s vs 1.0 s, on 2 shared cores).
        one_thread = self.device.type == "cpu"
        if one_thread:
            _single_thread_enter()
        try:
            with torch.no_grad():
                for a in range(0, t, _CHUNK):
                    b = min(t, a + _CHUNK)

                    def tt(x, a=a, b=b):
                        return torch.from_numpy(np.ascontiguousarray(x[a:b])).to(self.device)

                    v_out, j_out = self._run(tt(be), tt(go), tt(bp), tt(lh), tt(rh), tt(tr))
                    verts[a:b] = v_out.cpu().numpy()
                    jo = j_out.cpu().numpy()
                    joints[a:b] = jo[:, :NUM_JOINTS]
                    keyp[a:b] = jo[:, NUM_JOINTS: NUM_JOINTS + 21]
        finally:
            if one_thread:
                _single_thread_exit()
        return BodyOutput(verts, joints, keyp)

    __call__ = forward

    def _run(self, betas, go, bp, lh, rh, tr, use_smplx: bool | None = None):
        """(vertices, joints + smplx's extra keypoints) for one batch of torch tensors.

        Without pose-corrective shapes (the procedural model) the skinning is done here with
        smplx's own building blocks, skipping the (T, 459) x (459, 3V) product of all-zero
        posedirs, which is ~2/3 of the time of a single frame. Real files go through smplx.
        """
        s = self._smplx
        if use_smplx if use_smplx is not None else not self._zero_posedirs:
            out = s(betas=betas, global_orient=go, body_pose=bp, left_hand_pose=lh, right_hand_pose=rh,
                    transl=tr)
            return out.vertices, out.joints
        from smplx.lbs import batch_rigid_transform, batch_rodrigues, blend_shapes, vertices2joints

        n = go.shape[0]
        pose = torch.cat([go, bp, lh + s.left_hand_mean, rh + s.right_hand_mean], dim=1)
        same_shape = bool((betas == betas[:1]).all())  # one person: shape the body once
        b = betas[:1] if same_shape else betas
        v_shaped = s.v_template + blend_shapes(b, s.shapedirs)
        joints = vertices2joints(s.J_regressor, v_shaped)
        if same_shape:
            v_shaped, joints = v_shaped.expand(n, -1, -1), joints.expand(n, -1, -1)
        rot = batch_rodrigues(pose.reshape(-1, 3)).reshape(n, -1, 3, 3)
        j_posed, rel = batch_rigid_transform(rot, joints, s.parents, dtype=v_shaped.dtype)
        tf = torch.matmul(s.lbs_weights, rel.reshape(n, -1, 16)).reshape(n, -1, 4, 4)[:, :, :3]
        # v' = R v + t per vertex, written as three broadcast multiply-adds (much faster than an
        # einsum over (T, V, 3, 3) on CPU)
        verts = (tf[..., 0] * v_shaped[..., 0:1] + tf[..., 1] * v_shaped[..., 1:2]
                 + tf[..., 2] * v_shaped[..., 2:3] + tf[..., 3])
        keyp = s.vertex_joint_selector(verts, j_posed)
        return verts + tr[:, None], keyp + tr[:, None]

    def pose_track(self, track: SMPLHTrack) -> BodyOutput:
        """All frames of a track (invalid frames are posed too; callers skip them)."""
        return self.forward(track.betas, track.global_orient, track.body_pose, track.left_hand_pose,
                            track.right_hand_pose, track.transl)

    # -- rest pose helpers ---------------------------------------------------------------------
    def rest(self, betas=None) -> BodyOutput:
        """The unposed body (T-pose, canonical y-up frame) for one shape."""
        be = np.zeros(NUM_BETAS, np.float32) if betas is None else np.asarray(betas, np.float32)
        z = np.zeros((1, 3), np.float32)
        return self.forward(be, z, np.zeros((1, 63), np.float32), transl=z)

    def rest_joints(self, betas=None) -> np.ndarray:
        """(52, 3) joints of the unposed body; rest_joints(b)[0] is the pivot of global_orient."""
        return self.rest(betas).joints[0]

    def reshape_track(self, track: SMPLHTrack, betas, keep: str = "feet") -> SMPLHTrack:
        """The same motion with another body shape (e.g. an avatar's betas).

        keep="pelvis" leaves the pelvis where it was; keep="feet" (default) also moves it along
        the body's own up axis by the change in pelvis height above the soles, so a standing
        person neither floats nor sinks when their legs get longer or shorter.
        """
        if keep not in ("feet", "pelvis"):
            raise ValueError(f"reshape_track: keep must be 'feet' or 'pelvis', not {keep!r}")
        new_betas = np.zeros(NUM_BETAS, np.float32)
        b = np.asarray(betas, np.float32).reshape(-1)[:NUM_BETAS]
        new_betas[: b.shape[0]] = b
        old_rest, new_rest = self.rest(track.betas), self.rest(new_betas)
        shift = old_rest.joints[0, 0] - new_rest.joints[0, 0]
        transl = track.transl + shift[None]
        if keep == "feet":
            rise = ((new_rest.joints[0, 0, 1] - new_rest.vertices[0, :, 1].min())
                    - (old_rest.joints[0, 0, 1] - old_rest.vertices[0, :, 1].min()))
            from .tracks import axis_angle_to_rotmat

            up = axis_angle_to_rotmat(track.global_orient)[:, :, 1]  # body y axis in the camera frame
            transl = transl + rise * up
        out = track.slice(slice(None)).at(track.start)
        out.betas = new_betas
        out.transl = transl.astype(np.float32)
        return out

    def transl_for(self, betas, pelvis_position) -> np.ndarray:
        """transl that puts the pelvis joint at pelvis_position (any orientation, any pose)."""
        return (np.asarray(pelvis_position, np.float32) - self.rest_joints(betas)[0]).astype(np.float32)


@functools.cache
def _cached(gender: str, model_dir: str | None, device: str) -> BodyModel:
    return BodyModel(model_dir, gender, device)


def get_body_model(gender: str = "neutral", device: str = "cpu") -> BodyModel:
    """One BodyModel per (gender, ANONYMASK_SMPLH_DIR, device) per process."""
    smplh = environment().smplh_dir
    return _cached(gender, None if smplh is None else str(smplh), device)
