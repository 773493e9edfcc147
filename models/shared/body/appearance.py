"""A bank of distinct avatars: body shape, gender, skin tone and clothing as vertex colours.

Clothing regions come from the rest body alone (skinning weights say which joint moves a vertex,
rest positions say how far along the limb it is), so the same code dresses the real SMPL-H mesh
and the procedural one. Avatars are drawn from a seeded generator and accepted only when they
differ enough from every avatar already in the bank, so the bank is deterministic and no two
avatars look alike.

An avatar moves on the skeleton the person was fitted with (the neutral shape, betas 0). Body
shape changes bone lengths too: along the shape space's first direction (overall size) a shape of
2 standard deviations moves the head and wrists 14 cm, so a small avatar's hands fall short of
where the person's were and its head sits below theirs, which the fill must then cover (measured:
docs/RESULTS.md, "the avatar moves on the skeleton its person was fitted with"). With ``skeleton_tol`` the bank keeps only shapes that
leave the skeleton where it is: :class:`SkeletonKeepingShapes` projects each drawn shape off the
directions that move the rest joints and bounds what is left, so avatars still differ in girth
and build, not in bone length.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from .tracks import JOINT_INDEX as J
from .tracks import NUM_BETAS, NUM_SKELETON_JOINTS

SKIN_TONES = np.array([  # light to dark
    (255, 224, 196), (241, 194, 160), (224, 172, 135), (198, 140, 105), (170, 115, 80),
    (141, 90, 60), (110, 70, 45), (80, 52, 35),
], dtype=np.float64)
HAIR_COLORS = np.array([
    (20, 17, 15), (60, 40, 25), (100, 65, 35), (165, 120, 70), (200, 170, 110), (140, 60, 30),
    (150, 150, 150), (225, 225, 220),
], dtype=np.float64)
CLOTH_COLORS = np.array([
    (200, 30, 35), (30, 60, 170), (30, 140, 60), (230, 190, 40), (240, 240, 240), (25, 25, 30),
    (120, 40, 140), (240, 120, 30), (60, 170, 200), (130, 130, 135), (150, 90, 50), (230, 110, 160),
    (20, 90, 90), (90, 110, 30),
], dtype=np.float64)
TROUSER_COLORS = np.array([
    (40, 60, 110), (25, 25, 30), (170, 150, 110), (110, 110, 115), (60, 40, 30), (70, 90, 60),
    (200, 200, 200), (120, 30, 40),
], dtype=np.float64)
SHOE_COLORS = np.array([(245, 245, 245), (20, 20, 20), (100, 60, 35), (200, 40, 40), (40, 70, 160)],
                       dtype=np.float64)
PATTERNS = ("solid", "stripes", "checker", "two_tone")

# Region codes
SKIN, HAIR, SHIRT, TROUSERS, SHOES, EYES, LIPS = range(7)


@dataclass
class Avatar:
    index: int
    name: str
    betas: np.ndarray  # (10,) float32
    gender: str
    vertex_colors: np.ndarray  # (V, 3) uint8
    attributes: dict = field(default_factory=dict)
    surface: np.ndarray | None = None  # (V,) int8 region code (SKIN, HAIR, SHIRT, ...) of each vertex
    fit: float = 0.5  # how loose the clothes are, 0 (fitted) to 1 (loose)


def surface_offsets(avatar: Avatar, cloth_m: tuple[float, float], hair_m: float, shoes_m: float) -> np.ndarray | None:
    """(V,) float32 metres each vertex stands off the body (None: all zero): clothes
    ``cloth_m[0]`` (fitted) to ``cloth_m[1]`` (loose) by the avatar's ``fit``, hair ``hair_m``
    (half again for long hair), shoes ``shoes_m``; skin, eyes and lips 0.

    The body model is unclothed, so a bare avatar is thinner than the dressed person it replaces,
    and the part of their outline it leaves uncovered is filled with made-up background."""
    if avatar.surface is None:
        return None
    lo, hi = (float(v) for v in cloth_m)
    per_code = np.zeros(LIPS + 1, np.float32)  # one offset per region code
    per_code[[SHIRT, TROUSERS]] = lo + float(avatar.fit) * (hi - lo)
    per_code[HAIR] = hair_m * (1.5 if avatar.attributes.get("hair_style") == "long" else 1.0)
    per_code[SHOES] = shoes_m
    if not per_code.any():
        return None
    return per_code[avatar.surface]


@dataclass
class _Style:
    gender: str
    betas: np.ndarray
    skin: np.ndarray
    hair: np.ndarray
    hair_style: str  # "short", "long", "bald"
    shirt: np.ndarray
    shirt2: np.ndarray
    pattern: str
    sleeves: str  # "short", "long"
    trousers: np.ndarray
    legs: str  # "long", "shorts"
    shoes: np.ndarray

    def signature(self) -> np.ndarray:
        """Numbers whose distance says how differently two avatars look."""
        return np.concatenate([
            self.shirt / 255.0 * 2.0, self.trousers / 255.0 * 1.5, self.skin / 255.0, self.hair / 255.0,
            self.shoes / 255.0 * 0.5,
            [0.8 * (self.pattern != "solid"), 0.6 * (self.sleeves == "short"), 0.6 * (self.legs == "shorts"),
             0.4 * (self.hair_style == "long")],
            0.25 * self.betas[:4],
        ])


class BodyRegions:
    """Per-vertex body coordinates of the rest mesh that clothing cuts are expressed in."""

    def __init__(self, v_template: np.ndarray, weights: np.ndarray, rest_joints: np.ndarray):
        v, w, jt = np.asarray(v_template, np.float64), np.asarray(weights), np.asarray(rest_joints)
        self.v = v
        dom = np.argmax(w, axis=1)
        self.dominant = dom

        def wsum(names):
            return w[:, [J[n] for n in names]].sum(1)

        sides = ("left", "right")
        self.arm = wsum([f"{s}_{n}" for s in sides for n in ("shoulder", "elbow")])
        self.hand = w[:, [J["left_wrist"], J["right_wrist"]] + list(range(22, 52))].sum(1)
        self.leg = wsum([f"{s}_{n}" for s in sides for n in ("hip", "knee")])
        self.foot = wsum([f"{s}_{n}" for s in sides for n in ("ankle", "foot")])
        self.head = wsum(["head"])
        self.neck = wsum(["neck"])
        # Distance along the arm from the shoulder joint, as a fraction of the shoulder-wrist length
        sh_x = abs(jt[J["left_shoulder"], 0])
        wr_x = abs(jt[J["left_wrist"], 0])
        el_x = abs(jt[J["left_elbow"], 0])
        self.arm_t = (np.abs(v[:, 0]) - sh_x) / max(wr_x - sh_x, 1e-6)
        self.elbow_t = (el_x - sh_x) / max(wr_x - sh_x, 1e-6)
        self.y = v[:, 1]
        self.ankle_y = jt[J["left_ankle"], 1]
        self.knee_y = jt[J["left_knee"], 1]
        self.hip_y = jt[J["left_hip"], 1]
        self.waist_y = 0.5 * (jt[J["pelvis"], 1] + jt[J["spine1"], 1])
        self.neck_y = jt[J["neck"], 1]
        self.head_j = jt[J["head"]]
        self.floor_y = v[:, 1].min()
        self.top_y = v[:, 1].max()

    def face_mask(self) -> np.ndarray:
        """Front of the head below the hairline."""
        hv = self.v - self.head_j
        head_h = self.top_y - self.head_j[1]
        return (self.head > 0.5) & (hv[:, 2] > 0.25 * np.abs(hv[:, 0]) + 0.01) & (hv[:, 1] < 0.62 * head_h)

    def hair_mask(self, style: str) -> np.ndarray:
        if style == "bald":
            return np.zeros(self.v.shape[0], bool)
        hv = self.v - self.head_j
        head_h = self.top_y - self.head_j[1]
        on_head = (self.head > 0.5) & ~self.face_mask()
        if style == "short":
            return on_head & (hv[:, 1] > 0.25 * head_h - 0.3 * np.clip(-hv[:, 2], 0, None))
        # long: the whole back of the head and the back of the neck
        neck_back = (self.neck > 0.3) & (hv[:, 2] < -0.01)
        return (on_head & (hv[:, 1] > -0.1 * head_h)) | neck_back


def _surface(regions: BodyRegions, st: _Style) -> np.ndarray:
    """(V,) int8 region code of every vertex for one style (SKIN, HAIR, SHIRT, ...)."""
    r = regions
    n = r.v.shape[0]
    code = np.full(n, SKIN, np.int8)
    # Shirt: torso above the waist line, arms up to the sleeve cut.
    torso = (r.arm + r.hand + r.leg + r.foot + r.head + r.neck) < 0.5
    sleeve_end = 0.45 * r.elbow_t if st.sleeves == "short" else 0.97
    arm_cover = (r.arm + r.hand > 0.5) & (r.arm_t < sleeve_end)
    shirt = (torso & (r.y > r.waist_y - 0.02)) | arm_cover
    shirt |= (r.neck > 0.4) & (r.y < r.neck_y + 0.01)
    code[shirt] = SHIRT
    # Trousers: pelvis below the waist line and the legs down to the cut.
    leg_cut = r.ankle_y + 0.03 if st.legs == "long" else 0.45 * r.knee_y + 0.55 * r.hip_y
    low = (r.y <= r.waist_y - 0.02) & ((r.leg > 0.3) | torso)
    code[low & (r.y > leg_cut)] = TROUSERS
    code[(r.foot > 0.5) & (r.y < r.ankle_y + 0.04)] = SHOES
    code[(r.foot + r.leg > 0.5) & (r.y < r.ankle_y - 0.02)] = SHOES
    code[r.hair_mask(st.hair_style)] = HAIR
    # Eyes and lips: small spots around smplx's eye vertices (ids valid for both meshes).
    if n >= 6890:
        for vid in (6260, 2800):
            code[np.linalg.norm(r.v - r.v[vid], axis=1) < 0.009] = EYES
        nose = r.v[332]
        mouth = nose + np.array([0.0, -0.035, -0.008])
        d = r.v - mouth
        code[(np.abs(d[:, 0]) < 0.022) & (np.abs(d[:, 1]) < 0.007) & (d[:, 2] > -0.02) & (r.head > 0.5)] = LIPS
    return code


def _dress(regions: BodyRegions, st: _Style, rng: np.random.Generator, code: np.ndarray) -> np.ndarray:
    """(V, 3) uint8 vertex colours for one style whose region codes are ``code``."""
    r = regions
    n = r.v.shape[0]
    colors = np.zeros((n, 3))
    colors[code == SKIN] = st.skin
    colors[code == HAIR] = st.hair
    colors[code == TROUSERS] = st.trousers
    colors[code == SHOES] = st.shoes
    colors[code == EYES] = st.skin * 0.35
    colors[code == LIPS] = st.skin * np.array([0.85, 0.6, 0.6])
    shirt_col = np.tile(st.shirt, (n, 1))
    if st.pattern == "stripes":
        band = (np.floor((r.y - r.floor_y) / 0.045) % 2 == 1)
        shirt_col[band] = st.shirt2
    elif st.pattern == "checker":
        ang = np.arctan2(r.v[:, 0], r.v[:, 2])
        cell = (np.floor((r.y - r.floor_y) / 0.08) + np.floor(ang / (np.pi / 4))) % 2 == 1
        shirt_col[cell] = st.shirt2
    elif st.pattern == "two_tone":
        shirt_col[(r.arm + r.hand > 0.5) | (r.y > r.neck_y - 0.12)] = st.shirt2
    colors[code == SHIRT] = shirt_col[code == SHIRT]
    # A little smooth, low-frequency variation so large areas do not look perfectly flat.
    phase = rng.uniform(0, 2 * np.pi, 3)
    wave = (np.sin(r.v[:, 0] * 23.0 + phase[0]) + np.sin(r.v[:, 1] * 17.0 + phase[1])
            + np.sin(r.v[:, 2] * 29.0 + phase[2])) / 3.0
    colors *= (1.0 + 0.05 * wave)[:, None]
    return np.clip(np.round(colors), 0, 255).astype(np.uint8)


def _contrast(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).sum())


def _random_style(rng: np.random.Generator) -> _Style:
    gender = ("male", "female", "neutral")[rng.integers(3)]
    betas = np.zeros(NUM_BETAS, np.float32)
    betas[:] = np.clip(rng.normal(0.0, 0.8, NUM_BETAS), -2.0, 2.0)
    jitter = lambda c: np.clip(c + rng.normal(0, 8, 3), 0, 255)  # noqa: E731
    shirt = CLOTH_COLORS[rng.integers(len(CLOTH_COLORS))]
    shirt2 = CLOTH_COLORS[rng.integers(len(CLOTH_COLORS))]
    while _contrast(shirt, shirt2) < 200:
        shirt2 = CLOTH_COLORS[rng.integers(len(CLOTH_COLORS))]
    hair_style = ("short", "long", "bald")[rng.choice(3, p=[0.55, 0.35, 0.10])]
    if gender == "female" and hair_style == "bald":
        hair_style = "long"
    return _Style(
        gender=gender, betas=betas,
        skin=jitter(SKIN_TONES[rng.integers(len(SKIN_TONES))]),
        hair=jitter(HAIR_COLORS[rng.integers(len(HAIR_COLORS))]), hair_style=hair_style,
        shirt=jitter(shirt), shirt2=jitter(shirt2), pattern=PATTERNS[rng.integers(len(PATTERNS))],
        sleeves=("short", "long")[rng.integers(2)],
        trousers=jitter(TROUSER_COLORS[rng.integers(len(TROUSER_COLORS))]),
        legs=("long", "long", "shorts")[rng.integers(3)],
        shoes=jitter(SHOE_COLORS[rng.integers(len(SHOE_COLORS))]),
    )


class SkeletonKeepingShapes:
    """Body shapes (betas) that leave the rest skeleton in place, for one body model.

    The rest joints are linear in betas (joints = J_regressor (template + shape_dirs betas)), so
    their displacement, with the soles kept on the floor as ``reshape_track(keep="feet")`` keeps
    them, is ``A @ betas`` for a (3 x joints, NUM_BETAS) matrix measured here by unit steps. Its
    right singular vectors order the shape directions by how far they move the skeleton. A
    direction that moves some joint more than ``tol`` metres per unit beta (per standard deviation
    of the bank's draws) is projected out; what is left is scaled down if it still moves a joint
    more than ``tol``, so no avatar's rest joint is further than ``tol`` from the neutral one."""

    def __init__(self, body_model, tol: float):
        if tol <= 0:
            raise ValueError(f"SkeletonKeepingShapes: tol must be > 0 metres, not {tol}")
        self.tol = float(tol)
        base = self._joints(body_model, np.zeros(NUM_BETAS, np.float32))
        self.A = np.stack([(self._joints(body_model, np.eye(NUM_BETAS, dtype=np.float32)[k]) - base).ravel()
                           for k in range(NUM_BETAS)], axis=1)  # (3 J, NUM_BETAS)
        _, _, vt = np.linalg.svd(self.A, full_matrices=False)
        reach = np.array([self.max_shift(v) for v in vt])  # metres per unit beta along each direction
        self.removed = vt[reach > self.tol]  # (k, NUM_BETAS) orthonormal rows

    @staticmethod
    def _joints(body_model, betas: np.ndarray) -> np.ndarray:
        rest = body_model.rest(betas)
        return rest.joints[0, :NUM_SKELETON_JOINTS] - np.array([0.0, rest.vertices[0, :, 1].min(), 0.0])

    def max_shift(self, betas) -> float:
        """The largest rest-joint displacement (metres) of a shape from the neutral one."""
        return float(np.linalg.norm((self.A @ np.asarray(betas, np.float64)).reshape(-1, 3), axis=1).max())

    def __call__(self, betas) -> np.ndarray:
        b = np.asarray(betas, np.float64)
        b = b - self.removed.T @ (self.removed @ b)
        shift = self.max_shift(b)
        if shift > self.tol:
            b = b * (self.tol / shift)
        return b.astype(np.float32)


class AppearanceBank:
    """size distinct avatars, deterministic for a seed; ``choose(key)`` maps ids to avatars.
    ``skeleton_tol`` (metres; None: body shapes drawn freely): keep every avatar's rest joints
    within it of the neutral skeleton the people are fitted with (:class:`SkeletonKeepingShapes`)."""

    MIN_DISTANCE = 0.9  # in signature units; two random styles average ~2.5

    def __init__(self, size: int = 32, seed: int = 0, body_model=None, skeleton_tol: float | None = None):
        if size < 1:
            raise ValueError("AppearanceBank size must be >= 1")
        if body_model is None:
            body_model = _default_body_model()
        self.size = int(size)
        self.seed = int(seed)
        self.regions = BodyRegions(body_model.v_template, body_model.lbs_weights, body_model.rest_joints())
        self.shapes = None if skeleton_tol is None else SkeletonKeepingShapes(body_model, skeleton_tol)
        rng = np.random.default_rng([self.seed, 20240611])
        styles: list[_Style] = []
        sigs: list[np.ndarray] = []
        threshold = self.MIN_DISTANCE
        tries = 0
        while len(styles) < self.size:
            st = _random_style(rng)
            if self.shapes is not None:
                st.betas = self.shapes(st.betas)
            sig = st.signature()
            if all(np.linalg.norm(sig - s) >= threshold for s in sigs):
                styles.append(st)
                sigs.append(sig)
            tries += 1
            if tries > 200 * self.size:  # huge banks: relax rather than loop forever
                threshold *= 0.8
                tries = 0
        self._styles = styles
        self._avatars: dict[int, Avatar] = {}

    def __len__(self) -> int:
        return self.size

    def avatar(self, i: int) -> Avatar:
        i = int(i) % self.size
        if i not in self._avatars:
            st = self._styles[i]
            rng = np.random.default_rng([self.seed, i, 7])
            code = _surface(self.regions, st)
            colors = _dress(self.regions, st, rng, code)
            # a stream of its own, so the looks drawn before clothes had volume stay as they were
            fit = float(np.random.default_rng([self.seed, i, 11]).uniform())
            rgb = lambda c: [int(x) for x in np.round(c)]  # noqa: E731
            attrs = dict(skin=rgb(st.skin), hair=rgb(st.hair), hair_style=st.hair_style, shirt=rgb(st.shirt),
                         shirt2=rgb(st.shirt2), pattern=st.pattern, sleeves=st.sleeves,
                         trousers=rgb(st.trousers), legs=st.legs, shoes=rgb(st.shoes))
            self._avatars[i] = Avatar(i, f"avatar_{self.seed:02d}_{i:03d}_{st.gender}", st.betas.copy(),
                                      st.gender, colors, attrs, code, fit)
        return self._avatars[i]

    @staticmethod
    def key_index(key: str, size: int) -> int:
        """Bank index for a key: a keyed BLAKE2 hash, so it is stable across processes and runs."""
        digest = hashlib.blake2b(str(key).encode("utf-8"), digest_size=8,
                                 person=b"anonymask-avtr").digest()
        return int.from_bytes(digest, "little") % int(size)

    def choose(self, key: str) -> Avatar:
        """The avatar for a key (e.g. '<video_id>/<track_id>'), stable across processes and runs."""
        return self.avatar(self.key_index(key, self.size))

    def __iter__(self):
        return (self.avatar(i) for i in range(self.size))


def _default_body_model():
    from anonymask.core.errors import MissingWeightsError

    from .model import get_body_model

    last: Exception | None = None
    for g in ("neutral", "male", "female"):
        try:
            return get_body_model(g)
        except MissingWeightsError as e:  # real files without a neutral model: any topology works
            last = e
    raise last  # type: ignore[misc]


def person_keys(spans: list[tuple[int, int]], boxes: np.ndarray, shots: list[tuple[int, int]] | None = None,
                max_gap: int = 10, overlap: int = 2, max_dist: float = 0.5, max_size: float = 1.5) -> list[int]:
    """Per track, the index of the first track of the person it continues: one person seen as
    several tracks in turn (lost and found again too far apart or too changed to be linked into
    one, a close-up covered by a face avatar then a posed one) keeps one
    appearance, instead of changing clothes from one track to the next.

    ``spans``: each track's visible frames [first, stop) (empty: stop <= first); ``boxes`` (N,T,4)
    pose/boxes. A track continues an earlier person when it starts at most ``max_gap`` frames
    after that person's last track ended (or ``overlap`` frames before), its first box's centre
    lies within ``max_dist`` x the larger box height of that track's last box's centre, and the
    heights differ by at most ``max_size`` x; the nearest such person wins. Two tracks seen at
    the same time (beyond ``overlap`` frames), or in different ``shots`` ([start, stop) between
    cuts), are never one person."""
    n = len(spans)
    shot_of = (lambda t: next((k for k, (a, b) in enumerate(shots) if a <= t < b), -1)) if shots else (lambda t: 0)
    keys = list(range(n))
    order = sorted((i for i in range(n) if spans[i][1] > spans[i][0]), key=lambda i: spans[i])
    people: list[list[int]] = []
    for i in order:
        a, b = spans[i]
        start = boxes[i, a]
        best, best_d = None, np.inf
        for p in people:
            j = p[-1]
            end = spans[j][1]
            if not (-overlap <= a - end <= max_gap) or any(spans[k][1] > a + overlap for k in p) \
                    or shot_of(a) != shot_of(end - 1):
                continue
            last = boxes[j, end - 1]
            if not (np.all(np.isfinite(start)) and np.all(np.isfinite(last))):
                continue
            h0, h1 = float(last[3] - last[1]), float(start[3] - start[1])
            if min(h0, h1) <= 0 or max(h0, h1) > max_size * min(h0, h1):
                continue
            d = float(np.hypot((start[0] + start[2] - last[0] - last[2]) / 2, (start[1] + start[3] - last[1] - last[3]) / 2))
            if d <= max_dist * max(h0, h1) and d < best_d:
                best, best_d = p, d
        if best is None:
            people.append([i])
        else:
            best.append(i)
            keys[i] = best[0]
    return keys
