"""`anonymask privacy epsilon|sigma` prints what the accountant module computes."""

import json

import pytest

from anonymask.cli.main import main
from anonymask.models.training.privacy import accountant


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


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["epsilon", "--q", "0.01", "--sigma", "nan", "--steps", "10", "--delta", "1e-5"], "--sigma"),
        (["epsilon", "--q", "0.01", "--sigma", "inf", "--steps", "10", "--delta", "1e-5"], "--sigma"),
        (["epsilon", "--q", "nan", "--sigma", "1", "--steps", "10", "--delta", "1e-5"], "--q"),
        (["epsilon", "--q", "0.01", "--sigma", "1", "--steps", "0", "--delta", "1e-5"], "--steps"),
        (["epsilon", "--q", "0.01", "--sigma", "1", "--steps", "10", "--delta", "2"], "--delta"),
        (["sigma", "--q", "0.01", "--epsilon", "nan", "--steps", "10", "--delta", "1e-5"], "--epsilon"),
        (["sigma", "--q", "0.01", "--epsilon", "-1", "--steps", "10", "--delta", "1e-5"], "--epsilon"),
        (["epsilon", "--q", "abc", "--sigma", "1", "--steps", "10", "--delta", "1e-5"], "--q"),
        (["epsilon", "--q", "0.01", "--steps", "10", "--delta", "1e-5"], "--sigma"),
        (["epsilon", "--q", "0.01", "--sigma", "1", "--steps", "10", "--delta", "1e-5", "--accountant", "prv",
          "--adjacency", "replace"], "prv"),
    ],
)
def test_bad_arguments_give_one_line_and_a_nonzero_exit(capsys, argv, needle):
    try:
        rc = main(["privacy", *argv])
    except SystemExit as e:  # argparse's own errors (unparsable values, missing flags)
        rc = e.code
    captured = capsys.readouterr()
    assert rc == 2 and captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in captured.err


def test_adjacency_and_same_batch(capsys):
    q, steps, delta = 128 / 40000, 150 * 40000 // 128, 1e-5
    base = ["privacy", "epsilon", "--q", str(q), "--sigma", "1", "--steps", str(steps), "--delta", str(delta), "--json"]
    assert main([*base, "--adjacency", "replace", "--accountant", "pld"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["adjacency"] == "replace" and rep["epsilon"] == pytest.approx(7.03, abs=0.01)
    assert main([*base, "--same-batch"]) == 0
    same = json.loads(capsys.readouterr().out)
    assert same["epsilon"] == pytest.approx(accountant.revealed_sampling_epsilon(q, 1.0, steps, delta))
    assert same["epsilon"] > 30
