"""The synthetic subjects: who performs the actions.

An identity is everything that stays the same across one person's videos and differs between
people: gender, body shape (betas), clothes, skin and hair (vertex colours), and motion style
(:mod:`style`). The anonymizer must remove all of it; re-identification metrics try to recover it.

Clothes are painted from this module's own palette and generator (shirts with stripes or two
tones, short or long sleeves, trousers or shorts, shoes, hair, simple face marks), independent of
the anonymizer's avatar bank (:mod:`anonymask.models.shared.body.appearance`), so a subject is not one of
the avatars that replace it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from anonymask.models.shared.body.tracks import JOINT_INDEX, NUM_BETAS
from anonymask.models.shared.synthetic.style import MotionStyle, sample_style

SKIN_TONES = np.array([
    [255, 224, 196], [241, 194, 160], [224, 172, 130], [198, 134, 96], [165, 110, 75],
    [141, 85, 54], [110, 66, 42], [88, 52, 34],
], np.uint8)  # fmt: skip
HAIR_COLOURS = np.array([
    [25, 20, 18], [60, 40, 28], [110, 75, 45], [170, 130, 80], [215, 185, 130], [130, 50, 25],
    [150, 150, 150],
], np.uint8)  # fmt: skip
CLOTH_COLOURS = np.array([
    [200, 30, 40], [30, 70, 170], [30, 130, 70], [240, 200, 40], [240, 120, 30], [120, 50, 150],
    [20, 20, 25], [235, 235, 230], [120, 120, 125], [40, 160, 180], [230, 110, 160], [110, 80, 50],
    [150, 180, 60], [70, 100, 140], [180, 150, 110], [90, 20, 40],
], np.uint8)  # fmt: skip
TROUSER_COLOURS = np.array([
    [35, 45, 80], [25, 25, 30], [90, 90, 95], [150, 130, 100], [60, 70, 45], [70, 50, 40],
    [110, 130, 160], [200, 195, 180],
], np.uint8)  # fmt: skip
SHOE_COLOURS = np.array([[20, 20, 20], [240, 240, 240], [110, 70, 40], [180, 40, 40], [60, 60, 140]], np.uint8)


@dataclass(frozen=True)
class Clothing:
    """What a subject wears; colours are RGB uint8 triples."""

    skin: tuple[int, int, int]
    hair: tuple[int, int, int]
    top: tuple[int, int, int]
    top2: tuple[int, int, int]  # stripe / lower-half colour
    pattern: str  # "solid", "stripes", "two_tone"
    long_sleeves: bool
    bottom: tuple[int, int, int]
    shorts: bool
    shoes: tuple[int, int, int]
    long_hair: bool

    def to_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}

    @classmethod
    def from_dict(cls, d: dict) -> Clothing:
        return cls(**{k: (tuple(int(x) for x in v) if isinstance(v, list) else v) for k, v in d.items()})


@dataclass(frozen=True)
class Identity:
    """One synthetic subject. ``subject_id`` counts from 1 (``s01``)."""

    subject_id: int
    gender: str
    betas: np.ndarray = field(repr=False)
    style: MotionStyle
    clothing: Clothing

    @property
    def name(self) -> str:
        return f"s{self.subject_id:02d}"

    def vertex_colors(self, body_model) -> np.ndarray:
        """(V,3) uint8 colours of this subject on ``body_model``'s mesh."""
        return paint(body_model, self.betas, self.clothing, seed=self.subject_id)

    def to_dict(self) -> dict:
        return {
            "subject_id": self.subject_id, "name": self.name, "gender": self.gender,
            "betas": [round(float(b), 6) for b in self.betas], "style": self.style.to_dict(),
            "clothing": self.clothing.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: dict) -> Identity:
        return cls(int(d["subject_id"]), str(d["gender"]), np.asarray(d["betas"], np.float32),
                   MotionStyle.from_dict(d["style"]), Clothing.from_dict(d["clothing"]))


def _pick(palette: np.ndarray, i: int) -> tuple[int, int, int]:
    return tuple(int(c) for c in palette[i % len(palette)])


def make_identities(n: int, seed: int = 0) -> list[Identity]:
    """``n`` distinct subjects, the same ones for the same seed; genders alternate in a shuffled
    order (half male, half female), shirt colours are drawn without repetition while they last."""
    if n < 1:
        raise ValueError(f"need at least one identity (got {n})")
    rng = np.random.default_rng([seed, 0x5EED1D])
    genders = ["male" if i % 2 == 0 else "female" for i in range(n)]
    rng.shuffle(genders)
    tops = rng.permutation(len(CLOTH_COLOURS))
    out = []
    for i in range(n):
        g = genders[i]
        betas = np.clip(rng.normal(0.0, 0.8, NUM_BETAS), -2.0, 2.0).astype(np.float32)
        top = int(tops[i % len(tops)])
        top2 = int((top + rng.integers(3, len(CLOTH_COLOURS) - 2)) % len(CLOTH_COLOURS))
        clothing = Clothing(
            skin=_pick(SKIN_TONES, int(rng.integers(len(SKIN_TONES)))),
            hair=_pick(HAIR_COLOURS, int(rng.integers(len(HAIR_COLOURS)))),
            top=_pick(CLOTH_COLOURS, top),
            top2=_pick(CLOTH_COLOURS, top2),
            pattern=str(rng.choice(["solid", "stripes", "two_tone"], p=[0.45, 0.35, 0.2])),
            long_sleeves=bool(rng.uniform() < 0.5),
            bottom=_pick(TROUSER_COLOURS, int(rng.integers(len(TROUSER_COLOURS)))),
            shorts=bool(rng.uniform() < 0.25),
            shoes=_pick(SHOE_COLOURS, int(rng.integers(len(SHOE_COLOURS)))),
            long_hair=bool(rng.uniform() < (0.7 if g == "female" else 0.15)),
        )
        out.append(Identity(i + 1, g, betas, sample_style(rng), clothing))
    return out


# ------------------------------------------------------------------------------------- painting
_REGIONS = {
    "head": ("head", "neck"),
    "torso": ("pelvis", "spine1", "spine2", "spine3", "left_collar", "right_collar"),
    "upper_arm": ("left_shoulder", "right_shoulder"),
    "forearm": ("left_elbow", "right_elbow"),
    "hand": ("left_wrist", "right_wrist"),
    "thigh": ("left_hip", "right_hip"),
    "shin": ("left_knee", "right_knee"),
    "foot": ("left_ankle", "right_ankle", "left_foot", "right_foot"),
}


def vertex_regions(body_model) -> dict[str, np.ndarray]:
    """Boolean (V,) masks of body regions, by each vertex's dominant skinning joint."""
    dom = np.asarray(body_model.lbs_weights).argmax(axis=1)
    out = {}
    for region, joints in _REGIONS.items():
        out[region] = np.isin(dom, [JOINT_INDEX[j] for j in joints])
    out["hand"] |= dom >= 22  # fingers
    return out


def paint(body_model, betas: np.ndarray, c: Clothing, seed: int = 0) -> np.ndarray:
    """Vertex colours for clothing ``c`` on the body ``betas`` (regions from the rest-pose mesh)."""
    from anonymask.models.shared.synthetic.scene import rest_body

    rest = rest_body(body_model, betas)
    v, j = rest.vertices[0], rest.joints[0]
    reg = vertex_regions(body_model)
    col = np.zeros((v.shape[0], 3), np.float32)
    skin, hair = np.asarray(c.skin, np.float32), np.asarray(c.hair, np.float32)
    col[:] = skin
    # top: torso above the waist, sleeves
    waist = j[JOINT_INDEX["pelvis"], 1] + 0.6 * (j[JOINT_INDEX["spine1"], 1] - j[JOINT_INDEX["pelvis"], 1])
    top = (reg["torso"] & (v[:, 1] >= waist)) | reg["upper_arm"] | (reg["forearm"] if c.long_sleeves else False)
    top_col = np.where(_pattern(v, c.pattern, j)[:, None], np.asarray(c.top2, np.float32), np.asarray(c.top, np.float32))
    col[top] = top_col[top]
    # bottom: hips and thighs, shins for trousers
    bottom = (reg["torso"] & (v[:, 1] < waist)) | reg["thigh"] | (False if c.shorts else reg["shin"])
    col[bottom] = np.asarray(c.bottom, np.float32)
    col[reg["foot"]] = np.asarray(c.shoes, np.float32)
    # hair: the top and back of the head; long hair reaches the neck at the back
    head = reg["head"] & (v[:, 1] > j[JOINT_INDEX["neck"], 1])
    face = _face_points(body_model, v)
    top_y = v[head, 1].max()
    z_mid = v[head, 2].mean()
    eye_y = face["eyes"][0][1]
    low = j[JOINT_INDEX["neck"], 1] if c.long_hair else eye_y
    cap = head & ((v[:, 1] > top_y - 0.06) | ((v[:, 2] < z_mid - 0.01) & (v[:, 1] > low)))
    col[cap] = hair
    # face marks: eyes, brows, mouth (vertex ids smplx uses for its face keypoints)
    for centres, radius, rgb in ((face["eyes"], 0.013, (40, 30, 30)), (face["brows"], 0.012, hair * 0.8),
                                 (face["mouth"], 0.014, (150, 60, 60))):
        for p in centres:
            near = head & (np.linalg.norm((v - p) * np.array([1.0, 1.6, 1.0]), axis=1) < radius)
            col[near] = rgb
    # a little fabric/skin grain, fixed per subject
    rng = np.random.default_rng([seed, 77])
    col *= rng.uniform(0.93, 1.05, (v.shape[0], 1)).astype(np.float32)
    return np.clip(np.rint(col), 0, 255).astype(np.uint8)


def _pattern(v: np.ndarray, pattern: str, j: np.ndarray) -> np.ndarray:
    """True where the shirt shows its second colour."""
    if pattern == "stripes":
        return (np.floor(v[:, 1] / 0.06).astype(int) % 2) == 0
    if pattern == "two_tone":
        chest = j[JOINT_INDEX["spine3"], 1]
        return v[:, 1] < chest - 0.05
    return np.zeros(v.shape[0], bool)


def _face_points(body_model, v: np.ndarray) -> dict[str, list[np.ndarray]]:
    from anonymask.models.shared.body.procedural import LANDMARK_VERTEX_IDS as ids

    leye, reye, nose = v[ids["leye"]], v[ids["reye"]], v[ids["nose"]]
    up = np.array([0.0, 1.0, 0.0])
    return {
        "eyes": [leye, reye],
        "brows": [leye + 0.022 * up, reye + 0.022 * up],
        "mouth": [nose - 0.04 * up],
    }
