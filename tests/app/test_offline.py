"""Privacy invariant 7: nothing reaches the network at run time (weights load from local folders).

Every outgoing connection to a non-loopback address is turned into an error while the
weight-backed components load and run.
"""

import socket

import numpy as np
import pytest


@pytest.fixture
def no_network(monkeypatch):
    attempts = []
    real_connect = socket.socket.connect

    def guarded(self, address):
        host = address[0] if isinstance(address, tuple) else str(address)
        if isinstance(address, tuple) and host not in ("127.0.0.1", "localhost", "::1"):
            attempts.append(address)
            raise OSError(f"network access attempted: {address}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    return attempts


def test_weight_backed_components_run_offline(no_network, tmp_path):
    from anonymask.models.anonymizer.refine.animatediff import AnimateDiffRefiner
    from anonymask.models.anonymizer.refine.tiny import build_tiny_refiner_weights
    from anonymask.models.anonymizer.segment.backends import get_segmenter
    from anonymask.models.training.action.mvit import build_action_model

    root = build_tiny_refiner_weights(tmp_path / "w")
    refiner = AnimateDiffRefiner(weights_root=root, num_inference_steps=2, strength=0.8)
    frames = np.random.default_rng(0).integers(0, 255, (4, 64, 64, 3), dtype=np.uint8)
    conds = {k: frames for k in ("depth", "pose", "face")}
    assert refiner.refine(frames, conds).shape == frames.shape
    assert get_segmenter("mediapipe").segment(frames).shape == (4, 64, 64)
    assert build_action_model(5, arch="tiny") is not None
    assert no_network == []
