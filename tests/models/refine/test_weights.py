"""The refine/ weights layout: what is required, and one error naming everything that is missing."""

from pathlib import Path

import pytest

from anonymask.core.errors import MissingWeightsError
from anonymask.models.anonymizer.refine.weights import (
    REQUIRED,
    SOURCES,
    download_instructions,
    missing_refine_files,
    resolve_refine_weights,
)


def write_layout(root: Path, skip: set[str] = frozenset()) -> Path:
    """Empty files for every requirement (first alternative's files), except the paths in ``skip``."""
    for folder, requirements in REQUIRED.items():
        for alternatives in requirements:
            for name in alternatives[0].split("+"):
                rel = f"refine/{folder}/{name}"
                if rel not in skip:
                    (root / rel).parent.mkdir(parents=True, exist_ok=True)
                    (root / rel).write_bytes(b"")
    return root


def test_complete_layout_resolves(tmp_path):
    weights = resolve_refine_weights(write_layout(tmp_path))
    assert weights.sd15 == tmp_path / "refine" / "sd15"
    assert weights.motion_adapter == tmp_path / "refine" / "motion_adapter"
    assert list(weights.controlnets) == ["depth", "pose", "face"]
    assert weights.controlnets["pose"] == tmp_path / "refine" / "controlnet_openpose"


def test_empty_folder_lists_every_component_and_where_to_get_it(tmp_path):
    with pytest.raises(MissingWeightsError) as info:
        resolve_refine_weights(tmp_path)
    err = info.value
    text = str(err)
    assert len(err.missing) == sum(len(r) for r in REQUIRED.values())
    for folder in REQUIRED:
        assert f"refine/{folder}/" in text
    for repo, _ in SOURCES.values():
        assert repo in text
    assert "ANONYMASK_WEIGHTS" in text


def test_one_missing_file_is_named_alone(tmp_path):
    rel = "refine/controlnet_face/diffusion_pytorch_model.safetensors"
    write_layout(tmp_path, skip={rel})
    assert missing_refine_files(tmp_path) == [
        rel + " (or diffusion_pytorch_model.bin, diffusion_pytorch_model.safetensors.index.json, "
        "diffusion_pytorch_model.bin.index.json)"
    ]
    with pytest.raises(MissingWeightsError, match="controlnet_face"):
        resolve_refine_weights(tmp_path)
    (tmp_path / "refine/controlnet_face/diffusion_pytorch_model.bin").write_bytes(b"")  # .bin is accepted
    assert missing_refine_files(tmp_path) == []


def test_tokenizer_in_either_format(tmp_path):
    write_layout(tmp_path, skip={"refine/sd15/tokenizer/tokenizer.json"})
    assert missing_refine_files(tmp_path) == ["refine/sd15/tokenizer/tokenizer.json (or vocab.json+merges.txt)"]
    tok = tmp_path / "refine/sd15/tokenizer"
    tok.mkdir(parents=True)
    (tok / "vocab.json").write_text("{}")
    assert missing_refine_files(tmp_path) != []  # vocab.json alone is not enough
    (tok / "merges.txt").write_text("")
    assert missing_refine_files(tmp_path) == []


def test_environment_variable_is_the_default_root(tmp_path, monkeypatch):
    monkeypatch.setenv("ANONYMASK_WEIGHTS", str(write_layout(tmp_path)))
    assert resolve_refine_weights().root == tmp_path / "refine"
    monkeypatch.delenv("ANONYMASK_WEIGHTS")
    with pytest.raises(MissingWeightsError, match="ANONYMASK_WEIGHTS is not set"):
        resolve_refine_weights()


def test_download_recipe_is_python_and_names_every_source():
    text = download_instructions("/data/weights/refine")
    compile(text, "recipe", "exec")
    for repo, sub in SOURCES.values():
        assert repo in text
        if sub:
            assert sub in text
    for folder in ("sd15", "motion_adapter", "controlnet_depth", "controlnet_openpose", "controlnet_face"):
        assert f"/{folder}" in text


def test_tiny_weights_have_the_real_layout(tiny_weights):
    assert missing_refine_files(tiny_weights) == []
    assert (tiny_weights / "refine/sd15/model_index.json").is_file()
