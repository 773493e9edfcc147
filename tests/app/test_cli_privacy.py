"""`anonymask privacy epsilon|sigma` prints what the accountant module computes."""

import json

import pytest

from anonymask.cli import main
from anonymask.models.privacy import accountant


@pytest.mark.parametrize("acc", ["rdp", "pld"])
def test_epsilon_and_sigma_round_trip(capsys, acc):
    q, steps, delta = 0.01, 1000, 1e-5
    assert main(["privacy", "epsilon", "--q", str(q), "--sigma", "1.2", "--steps", str(steps),
                 "--delta", str(delta), "--accountant", acc, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["epsilon"] == pytest.approx(accountant.epsilon(q, 1.2, steps, delta, acc))
    assert main(["privacy", "sigma", "--q", str(q), "--epsilon", str(out["epsilon"]), "--steps", str(steps),
                 "--delta", str(delta), "--accountant", acc, "--json"]) == 0
    sig = json.loads(capsys.readouterr().out)["sigma"]
    assert sig == pytest.approx(1.2, rel=0.01)


def test_reference_point_rdp(capsys):
    # STACK.md / the MaskDP paper's setting: q=128/40000, sigma=1, 150 epochs, delta=1e-5 -> 4.32 (RDP)
    main(["privacy", "epsilon", "--q", str(128 / 40000), "--sigma", "1", "--steps", str(150 * 40000 // 128),
          "--delta", "1e-5"])
    text = capsys.readouterr().out
    eps = float(text.split("epsilon=")[1].split()[0])
    assert eps == pytest.approx(4.32, abs=0.01)
