import numpy as np
import pytest

from anonymask.models.anonymizer.skeleton.graphs import (
    NTU25,
    SMPL22,
    SMPLH52,
    adjacency_partitions,
    get_graph,
    retarget_bone_lengths,
)


@pytest.mark.parametrize("graph", [NTU25, SMPL22, SMPLH52])
def test_graph_is_a_tree_rooted_at_root(graph):
    parents = graph.parents
    assert parents[graph.root] == -1
    assert sum(p == -1 for p in parents) == 1
    order = graph.topological_order()
    assert sorted(order) == list(range(graph.num_joints))
    seen = set()
    for j in order:
        assert parents[j] == -1 or parents[j] in seen
        seen.add(j)
    assert len(graph.edges()) == graph.num_joints - 1


def test_smplh_fingers_hang_from_the_wrists():
    p = SMPLH52.parents
    assert [p[22 + 3 * f] for f in range(5)] == [20] * 5
    assert [p[37 + 3 * f] for f in range(5)] == [21] * 5
    assert p[23] == 22 and p[24] == 23


def test_get_graph_by_joint_count_and_name():
    assert get_graph(None, 25) is NTU25
    assert get_graph(None, 22) is SMPL22
    assert get_graph(None, 52) is SMPLH52
    assert get_graph(None, 17) is None
    assert get_graph("smpl22", 22) is SMPL22
    with pytest.raises(ValueError, match="joints"):
        get_graph("ntu25", 22)
    with pytest.raises(ValueError, match="unknown"):
        get_graph("nope")


def test_adjacency_partitions_connect_parent_and_children():
    a = adjacency_partitions(NTU25, 25)
    assert a.shape == (3, 25, 25)
    np.testing.assert_array_equal(a[0], np.eye(25))
    # the elbow (5) gathers from its parent, the shoulder (4), and from its child, the wrist (6)
    assert a[1, 5, 4] == 1.0 and a[1, 5].sum() == 1.0
    assert a[2, 5, 6] == 1.0
    # the spine shoulder (20) has three children (neck, both shoulders); spine mid is its parent
    np.testing.assert_allclose(a[2, 20, [2, 4, 8]], [1 / 3] * 3, rtol=1e-6)
    assert a[2, 20].sum() == pytest.approx(1.0)
    assert a[1, 20, 1] == 1.0
    free = adjacency_partitions(None, 7)
    assert free.shape == (2, 7, 7) and np.allclose(free[1].sum(1), 1.0)


def test_synthetic_bone_lengths_are_per_subject_constants(synthetic):
    x = synthetic["sequences"]
    lengths = NTU25.bone_lengths(x)  # (N, T, 24)
    within = lengths.std(axis=1).mean()  # only sensor noise changes a bone over time
    per_subject = np.stack([lengths[synthetic["subjects"] == k].mean(axis=(0, 1)) for k in range(6)])
    between = per_subject.std(axis=0).mean()
    assert within < 0.02
    assert between > 0.01
    assert set(np.unique(synthetic["genders"])) == {0, 1}


def test_retarget_bone_lengths_keeps_root_and_directions(synthetic):
    x = synthetic["sequences"][:3]
    target = np.linspace(0.05, 0.4, 24)
    y = retarget_bone_lengths(x, NTU25, target)
    assert y.shape == x.shape and y.dtype == x.dtype
    np.testing.assert_allclose(NTU25.bone_lengths(y), np.broadcast_to(target, (3, 24, 24)), atol=1e-5)
    np.testing.assert_allclose(y[..., 0, :], x[..., 0, :])
    child, parent = np.array(NTU25.edges()).T
    dx = x[..., child, :] - x[..., parent, :]
    dy = y[..., child, :] - y[..., parent, :]
    cos = (dx * dy).sum(-1) / np.linalg.norm(dx, axis=-1) / np.linalg.norm(dy, axis=-1)
    assert cos.min() > 0.9999
    # its own lengths give the input back
    np.testing.assert_allclose(retarget_bone_lengths(x[0, 0], NTU25, NTU25.bone_lengths(x[0, 0])), x[0, 0], atol=1e-5)
    with pytest.raises(ValueError, match="24 bone lengths"):
        retarget_bone_lengths(x, NTU25, target[:5])
