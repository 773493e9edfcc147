"""Static-camera backgrounds from the real photographs that scikit-image ships (none shows a person).

Photos are used whole (cover-resized and centre-cropped to the frame). Two "rooms" join a brick-wall
photo and a floor photo (gravel or grass) at the row where the wall meets the floor for the given
camera, so people standing on the ground plane look like they stand on that floor.
"""

from __future__ import annotations

import numpy as np

# photos bundled with scikit-image (no download): background id -> skimage.data loader
_PHOTOS: dict[str, str] = {
    "motorcycle": "stereo_motorcycle",
    "rocket": "rocket",
    "coffee": "coffee",
    "chelsea": "chelsea",
}
_ROOMS: dict[str, tuple[str, tuple[float, float, float], str, tuple[float, float, float]]] = {
    # wall photo, wall tint (RGB gains), floor photo, floor tint
    "courtyard": ("brick", (1.05, 0.72, 0.55), "gravel", (0.95, 0.9, 0.8)),
    "garden": ("brick", (0.9, 0.8, 0.75), "grass", (0.55, 0.85, 0.45)),
}
BACKGROUNDS: tuple[str, ...] = ("motorcycle", "courtyard", "rocket", "garden", "coffee", "chelsea")


def _photo(name: str) -> np.ndarray:
    import skimage.data

    img = getattr(skimage.data, name)()
    if isinstance(img, tuple):  # stereo_motorcycle -> (left, right, disparity)
        img = img[0]
    if img.ndim == 2:
        img = np.repeat(img[..., None], 3, axis=-1)
    return np.ascontiguousarray(img[..., :3])


def cover(img: np.ndarray, height: int, width: int) -> np.ndarray:
    """Resize ``img`` to cover (height, width) keeping its aspect, crop the centre; uint8 RGB."""
    from skimage.transform import resize

    h, w = img.shape[:2]
    s = max(height / h, width / w)
    nh, nw = max(height, int(np.ceil(h * s))), max(width, int(np.ceil(w * s)))
    out = resize(img, (nh, nw), order=1, anti_aliasing=s < 1, preserve_range=True)
    y0, x0 = (nh - height) // 2, (nw - width) // 2
    return np.clip(np.rint(out[y0:y0 + height, x0:x0 + width]), 0, 255).astype(np.uint8)


def _tinted(img: np.ndarray, tint: tuple[float, float, float]) -> np.ndarray:
    return np.clip(img.astype(np.float32) * np.asarray(tint, np.float32), 0, 255).astype(np.uint8)


def _room(spec: tuple, height: int, width: int, floor_row: int | None) -> np.ndarray:
    wall_name, wall_tint, floor_name, floor_tint = spec
    row = int(np.clip(height // 2 if floor_row is None else floor_row, 1, height - 1))
    wall_photo = np.rot90(_photo(wall_name))  # scikit-image's brick photo runs vertically
    wall = _tinted(cover(wall_photo, row, width), wall_tint)
    floor = _tinted(cover(_photo(floor_name), height - row, width), floor_tint)
    img = np.concatenate([wall, floor], axis=0)
    # a soft shadow line where wall meets floor
    band = slice(max(row - 1, 0), min(row + 2, height))
    img[band] = (img[band].astype(np.float32) * 0.6).astype(np.uint8)
    return img


def load_background(name: str, width: int, height: int, floor_row: int | None = None) -> np.ndarray:
    """Background ``name`` (one of :data:`BACKGROUNDS`) as (height, width, 3) uint8.

    ``floor_row`` is the image row of the wall/floor line for the two rooms (ignored by photos).
    """
    if name in _PHOTOS:
        return cover(_photo(_PHOTOS[name]), height, width)
    if name in _ROOMS:
        return _room(_ROOMS[name], height, width, floor_row)
    raise ValueError(f"unknown background {name!r}; known: {', '.join(BACKGROUNDS)}")
