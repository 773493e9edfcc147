"""A backend name is taken once: a second, different backend under it is refused (it used to
replace the first silently); the same factory registered again (a module imported twice) is not."""

import pytest

from anonymask.core import registry
from anonymask.core.errors import SettingsError


def _first(**kw):
    return "first"


def _second(**kw):
    return "second"


@pytest.fixture
def toy_kind():
    yield "toy-kind-for-test"
    registry._BACKENDS.pop("toy-kind-for-test", None)


def test_a_different_backend_under_a_taken_name_is_refused(toy_kind):
    registry.declare(toy_kind, "a", _first, summary="the first")
    registry.declare(toy_kind, "a", _first, summary="the same again")  # re-import: allowed
    with pytest.raises(SettingsError, match="registered twice: .*_first and .*_second"):
        registry.declare(toy_kind, "a", _second, summary="another")
    assert registry._BACKENDS[toy_kind]["a"]._target is _first
    registry.declare(toy_kind, "lazy", "anonymask.models.anonymizer.refine.animatediff:AnimateDiffRefiner")
    with pytest.raises(SettingsError, match="registered twice"):
        registry.declare(toy_kind, "lazy", "anonymask.models.anonymizer.refine.tiny:Other")
