"""One registry for every stage backend: pose, person detector, segment, inpaint, refine,
conditions and audit.

A backend is a factory (a class or a function) registered under ``(kind, name)``. Its settings
model is derived from the factory's own signature: parameter names, annotated types and defaults,
so a default is stated once, where the code that uses it is; ranges are stated there too
(``Annotated[float, Field(ge=0, le=1)]``). ``runtime`` names the parameters that are not settings
(arrays, devices) and are passed when the backend is built. Every settings model forbids
unknown keys, so a typo is an error and never a silently ignored value.

Backends register themselves when their module is imported; :data:`DECLARED_IN` lists those
modules so that asking for a kind imports them (light modules: heavy libraries are imported
inside the factories).
"""

from __future__ import annotations

import importlib
import inspect
import typing
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from anonymask.core.errors import SettingsError, did_you_mean, settings_problems

#: modules that declare each kind's backends (imported the first time the kind is asked for)
DECLARED_IN: dict[str, tuple[str, ...]] = {
    "pose4d": ("anonymask.models.anonymizer.pose.backends",),
    "person_detector": ("anonymask.models.anonymizer.pose.people", "anonymask.models.anonymizer.pose.rcnn",
                        "anonymask.models.anonymizer.pose.yolo"),
    "segment": ("anonymask.models.anonymizer.segment.backends",),
    "inpaint": ("anonymask.models.anonymizer.inpaint.backends", "anonymask.models.anonymizer.inpaint.aligned",
                "anonymask.models.anonymizer.inpaint.propainter"),
    "refine": ("anonymask.models.anonymizer.refine.backends",),
    "conditions": ("anonymask.models.anonymizer.refine.backends",),
    "audit": ("anonymask.models.anonymizer.audit.detectors", "anonymask.models.anonymizer.audit.fcos",
              "anonymask.models.anonymizer.audit.yolo"),
}


class BackendSettings(BaseModel):
    """Base of every backend's settings: unknown keys are errors; values are validated, not coerced
    silently into something else (``"0.6x"`` is not a number)."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)


class Backend:
    """One registered backend. ``target`` is the factory, or ``"module:attr"`` for a factory whose
    module is heavy (torch, diffusers): it is imported only when the backend is validated or built."""

    def __init__(self, kind: str, name: str, target: Callable[..., Any] | str, summary: str,
                 runtime: Iterable[str] = (),
                 defaults: dict[str, Any] | None = None, weights: str | None = None,
                 check: Callable[[dict[str, Any]], Any] | str | None = None):
        self.kind, self.name, self.summary, self.weights = kind, name, summary, weights
        self._check = check
        self._target, self._runtime = target, tuple(runtime)
        self._defaults = dict(defaults or {})
        self._settings: type[BackendSettings] | None = None

    @property
    def factory(self) -> Callable[..., Any]:
        if isinstance(self._target, str):
            module, attr = self._target.split(":")
            self._target = getattr(importlib.import_module(module), attr)
        return self._target

    @property
    def settings(self) -> type[BackendSettings]:
        """Its settings model (built from the factory's signature on first use)."""
        if self._settings is None:
            self._settings = settings_model(self.factory, f"{self.kind}_{self.name}_settings".replace("-", "_"),
                                            self._runtime, self._defaults)
        return self._settings

    def validate(self, values: dict[str, Any] | None = None) -> BackendSettings:
        return validate_model(self.settings, values or {}, f"{self.kind} backend {self.name!r}")

    def check_weights(self, settings: dict[str, Any] | None = None) -> None:
        """Raise ``MissingWeightsError`` (naming every missing file) if this backend, with these
        settings, would not find its weights; nothing to do for backends without weights. Cheap:
        looks at files only, loads nothing, so a run can check before any work starts."""
        if self._check is None:
            return
        if isinstance(self._check, str):
            module, attr = self._check.split(":")
            self._check = getattr(importlib.import_module(module), attr)
        self._check(dict(self.validate(settings or {})))

    def create(self, settings: BackendSettings | dict[str, Any] | None = None, **runtime: Any) -> Any:
        """Build the backend from validated settings plus runtime arguments (arrays, devices)."""
        s = settings if isinstance(settings, BackendSettings) else self.validate(settings)
        return self.factory(**dict(s), **runtime)

    def __repr__(self) -> str:
        return f"Backend({self.kind}/{self.name})"


_BACKENDS: dict[str, dict[str, Backend]] = {}


def _annotations(factory: Callable[..., Any]) -> dict[str, Any]:
    """The factory's parameter types, ``Annotated`` ranges kept. An annotation that cannot be
    resolved (a type imported only for type checkers) is an error naming the factory: a setting
    whose type is unknown would be validated as anything."""
    target = factory.__init__ if inspect.isclass(factory) else factory
    try:
        return typing.get_type_hints(target, include_extras=True)
    except Exception as err:
        raise TypeError(f"{_target_id(factory)}: its parameter annotations do not resolve ({err}); import the "
                        f"types they name at module level") from None


def settings_model(
    factory: Callable[..., Any], model_name: str, runtime: Iterable[str], defaults: dict[str, Any] | None,
) -> type[BackendSettings]:
    """A pydantic model of the factory's keyword parameters (defaults, types and ranges from its
    signature: ``Annotated[float, Field(ge=0, le=1)]``), leaving out ``runtime`` parameters.
    ``defaults`` replaces a signature default where the pipeline's differs from the library's
    (e.g. fewer refine steps)."""
    defaults = dict(defaults or {})
    skip = set(runtime)
    hints = _annotations(factory)
    fields: dict[str, Any] = {}
    for p in inspect.signature(factory).parameters.values():
        if p.name in ("self", "cls") or p.name in skip or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.default is inspect.Parameter.empty:
            raise TypeError(f"{model_name}: parameter {p.name!r} has no default; pass it as runtime")
        default = defaults.pop(p.name, p.default)
        fields[p.name] = (hints.get(p.name, Any), Field(default))
    if defaults:
        raise TypeError(f"{model_name}: defaults for unknown parameter(s) {sorted(defaults)}")
    return create_model(model_name, __base__=BackendSettings, **fields)


def register(
    kind: str, name: str, *, summary: str | None = None,
    runtime: Iterable[str] = (), defaults: dict[str, Any] | None = None, weights: str | None = None,
    check: Callable[[dict[str, Any]], Any] | str | None = None,
):
    """Decorator: register ``factory`` as backend ``name`` of ``kind``. ``check(settings)`` (a
    callable or ``"module:attr"``) raises ``MissingWeightsError`` when weight files are missing."""

    def deco(factory):
        doc = summary or (inspect.getdoc(factory) or "").split("\n")[0]
        declare(kind, name, factory, summary=doc, runtime=runtime, defaults=defaults, weights=weights,
                check=check)
        return factory

    return deco


def declare(
    kind: str, name: str, target: Callable[..., Any] | str, *, summary: str = "",
    runtime: Iterable[str] = (),
    defaults: dict[str, Any] | None = None, weights: str | None = None,
    check: Callable[[dict[str, Any]], Any] | str | None = None,
) -> None:
    """Register a backend whose factory is ``target`` (a callable, or ``"module:attr"`` imported on
    first use). A second, different backend under a taken name is an error (it used to replace the
    first silently); the same factory again (its module imported twice) is not."""
    old = _BACKENDS.get(kind, {}).get(name)
    if old is not None and _target_id(old._target) != _target_id(target):
        raise SettingsError(f"{kind} backend {name!r} is registered twice: {_target_id(old._target)} and "
                            f"{_target_id(target)}")
    _BACKENDS.setdefault(kind, {})[name] = Backend(kind, name, target, summary, runtime, defaults, weights,
                                                   check)


def _target_id(target: Callable[..., Any] | str) -> str:
    if isinstance(target, str):
        return target
    return f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', repr(target))}"


def backends(kind: str) -> dict[str, Backend]:
    """name -> backend of one kind (its declaring modules imported first)."""
    if kind not in DECLARED_IN:
        raise SettingsError(f"unknown backend kind {kind!r}; known: {', '.join(sorted(DECLARED_IN))}")
    for module in DECLARED_IN[kind]:
        importlib.import_module(module)
    return dict(_BACKENDS.get(kind, {}))


def get_backend(kind: str, name: str) -> Backend:
    found = backends(kind)
    if name not in found:
        raise SettingsError(f"unknown {kind} backend {name!r}; available: {', '.join(sorted(found))}"
                            + did_you_mean(name, found))
    return found[name]


def create(kind: str, name: str, settings: dict[str, Any] | None = None, **runtime: Any) -> Any:
    """Build backend ``name`` of ``kind`` with validated ``settings`` and runtime arguments."""
    return get_backend(kind, name).create(settings, **runtime)


def build(kind: str, name: str, **kwargs: Any) -> Any:
    """Build a backend from keyword arguments: those that are settings are validated, the rest
    (arrays, devices) are passed as they are. The form library code and tests use."""
    be = get_backend(kind, name)
    fields = be.settings.model_fields
    return be.create({k: v for k, v in kwargs.items() if k in fields},
                     **{k: v for k, v in kwargs.items() if k not in fields})


def names(kind: str) -> list[str]:
    return sorted(backends(kind))


def validate_model(model: type[BaseModel], values: dict[str, Any], where: str) -> Any:
    """``model(**values)`` with one readable line per problem instead of pydantic's report."""
    try:
        return model.model_validate(values)
    except ValidationError as err:
        raise SettingsError(f"{where}: {settings_problems(err.errors(), model.model_fields)}") from None
