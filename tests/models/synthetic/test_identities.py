"""Synthetic subjects: deterministic, distinct, dressed; backgrounds from the bundled photos."""

from __future__ import annotations

import numpy as np
import pytest

from anonymask.models.shared.body.model import get_body_model
from anonymask.models.shared.synthetic.backgrounds import BACKGROUNDS, load_background
from anonymask.models.shared.synthetic.identities import Identity, make_identities, vertex_regions


def test_identities_are_deterministic_and_distinct():
    a, b = make_identities(8, seed=5), make_identities(8, seed=5)
    assert [i.to_dict() for i in a] == [i.to_dict() for i in b]
    c = make_identities(8, seed=6)
    assert [i.to_dict() for i in a] != [i.to_dict() for i in c]
    assert [i.subject_id for i in a] == list(range(1, 9)) and a[2].name == "s03"
    assert sorted(i.gender for i in a) == ["female"] * 4 + ["male"] * 4
    betas = np.stack([i.betas for i in a])
    assert np.min([np.linalg.norm(betas[i] - betas[j]) for i in range(8) for j in range(i)]) > 0.3
    assert len({i.clothing.top for i in a}) == 8  # no two shirts share a colour
    styles = np.stack([i.style.vector() for i in a])
    assert np.min([np.abs(styles[i] - styles[j]).max() for i in range(8) for j in range(i)]) > 0.01
    for i in a:
        assert Identity.from_dict(i.to_dict()).to_dict() == i.to_dict()
    with pytest.raises(ValueError):
        make_identities(0)


def test_vertex_colours_follow_the_clothing():
    ids = make_identities(4, seed=1)
    idt = ids[0]
    bm = get_body_model(idt.gender)
    col = idt.vertex_colors(bm)
    assert col.shape == (bm.num_vertices, 3) and col.dtype == np.uint8
    reg = vertex_regions(bm)
    shoes = col[reg["foot"]].astype(float).mean(0)
    assert np.abs(shoes - np.asarray(idt.clothing.shoes)).max() < 12  # grain is a few percent
    hands = col[reg["hand"]].astype(float).mean(0)
    assert np.abs(hands - np.asarray(idt.clothing.skin)).max() < 15
    # two subjects look different
    other = ids[1].vertex_colors(get_body_model(ids[1].gender))
    if other.shape == col.shape:
        assert np.abs(other.astype(int) - col.astype(int)).mean() > 10


@pytest.mark.parametrize("name", BACKGROUNDS)
def test_backgrounds_load_at_any_size(name):
    img = load_background(name, 70, 38, floor_row=20)
    assert img.shape == (38, 70, 3) and img.dtype == np.uint8 and img.std() > 5
    np.testing.assert_array_equal(img, load_background(name, 70, 38, floor_row=20))


def test_room_floor_starts_at_the_floor_row_and_unknown_names_fail():
    img = load_background("garden", 64, 64, floor_row=20).astype(float)
    wall, floor = img[:18].mean((0, 1)), img[23:].mean((0, 1))
    assert floor[1] > floor[0] and wall[0] > wall[1]  # green grass below a reddish wall
    with pytest.raises(ValueError, match="unknown background"):
        load_background("astronaut", 32, 32)
