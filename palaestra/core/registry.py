"""The env registry: ids ``family:Name-vN``, kwargs and difficulty variants, plugins.

Every registered id is also registered with gymnasium, with the family's colon turned into a
dash (gymnasium reads a colon as ``module:id``): ``gymnasium.make("palaestra/game-Wordle-v0")``
once ``palaestra`` is imported, or ``gymnasium.make("palaestra:palaestra/game-Wordle-v0")``,
which imports it first. :func:`gymnasium_id` gives the mapping.

Third-party packages register envs through the entry-point group ``palaestra.envs``: the
entry point names a callable (called with no arguments) or a module (imported), which
calls :func:`register`::

    [project.entry-points."palaestra.envs"]
    my_envs = "my_package.envs:register_envs"
"""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
import importlib
import inspect
import re
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

import gymnasium as gym

from palaestra.core.env import Env

ENTRY_POINT_GROUP = "palaestra.envs"
GYMNASIUM_NAMESPACE = "palaestra"

_ID_PATTERN = re.compile(
    r"^(?P<family>[a-z][a-z0-9_]*):(?P<name>[A-Za-z0-9][A-Za-z0-9_.]*(?:-[A-Za-z0-9_.]+)*)-v(?P<version>\d+)$"
)

EnvCreator = Callable[..., Env]


def _load_entry_point(entry_point: str | Callable[..., Any], owner: str) -> Callable[..., Any]:
    """Resolve ``"module.path:Name"`` (or a callable) to the callable it names."""
    if callable(entry_point):
        return entry_point
    module_name, _, attribute = entry_point.partition(":")
    if not attribute:
        raise ValueError(f"entry point {entry_point!r} of {owner} must look like 'module:Name'")
    return getattr(importlib.import_module(module_name), attribute)


@dataclass(frozen=True)
class WrapperSpec:
    """One wrapper of a registered stack: ``entry_point(env, **kwargs)`` returns the wrapped env.

    ``entry_point`` is a wrapper class or factory, or a ``"module.path:Name"`` string (which
    keeps the spec picklable, so worker processes rebuild the same stack).

    >>> WrapperSpec("palaestra.core.wrappers:TurnLimit", {"max_turns": 4})  # doctest: +SKIP
    """

    entry_point: str | Callable[..., Env]
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        if callable(self.entry_point):
            return getattr(self.entry_point, "__name__", repr(self.entry_point))
        return self.entry_point.rpartition(":")[2]

    def apply(self, env: Env) -> Env:
        wrapped = _load_entry_point(self.entry_point, f"wrapper {self.name}")(env, **self.kwargs)
        if not isinstance(wrapped, Env):
            raise TypeError(
                f"wrapper {self.name} returned {type(wrapped).__name__}, not a palaestra Env "
                "(wrappers subclass palaestra.core.wrappers.Wrapper)"
            )
        return wrapped

    def __str__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())
        return f"{self.name}({args})"


@dataclass(frozen=True)
class Variant:
    """A variant of a registered id: extra kwargs and extra wrappers (applied after the base
    id's own wrappers). Plain mappings in ``register(variants=...)`` are kwargs only."""

    kwargs: Mapping[str, Any] = field(default_factory=dict)
    wrappers: tuple[WrapperSpec, ...] = ()
    description: str | None = None


class UnknownEnvError(KeyError):
    """Raised by :func:`make` and :func:`spec` for an id that is not registered."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])


@dataclass(frozen=True)
class EnvSpec:
    """Everything needed to build one registered env.

    ``entry_point`` is a class or factory, or a ``"module.path:ClassName"`` string that is
    imported only when the env is made (so registering costs nothing). ``wrappers`` is the
    stack applied to the built env, innermost first (like gymnasium's ``additional_wrappers``).
    """

    id: str
    entry_point: str | EnvCreator
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    description: str | None = None
    wrappers: tuple[WrapperSpec, ...] = ()

    @property
    def family(self) -> str:
        return _parse_id(self.id)["family"]

    @property
    def name(self) -> str:
        return _parse_id(self.id)["name"]

    @property
    def version(self) -> int:
        return int(_parse_id(self.id)["version"])

    def load(self) -> EnvCreator:
        """Resolve the entry point to a callable."""
        return _load_entry_point(self.entry_point, repr(self.id))

    def summary(self) -> str:
        """The one-paragraph description (explicit, else the env class docstring's first paragraph)."""
        if self.description:
            return self.description
        doc = inspect.getdoc(self.load()) or ""
        return doc.split("\n\n")[0].replace("\n", " ").strip()

    def make(self, **kwargs: Any) -> Env:
        """Build the env with the registered kwargs updated by ``kwargs``, then wrap it in
        the registered wrapper stack."""
        merged = {**self.kwargs, **kwargs}
        env = self.load()(**merged)
        if not isinstance(env, Env):
            raise TypeError(
                f"entry point of {self.id!r} returned {type(env).__name__}, not a palaestra Env "
                "(register wrappers with register(..., wrappers=[WrapperSpec(...)]))"
            )
        for wrapper in self.wrappers:
            env = wrapper.apply(env)
        env.spec = dataclasses.replace(
            gym.spec(gymnasium_id(self.id)), kwargs={"id": self.id, **kwargs}
        )
        return env

    @property
    def wrapper_stack(self) -> str:
        """The wrappers as text, outermost first (empty when there are none)."""
        return " <- ".join(str(w) for w in reversed(self.wrappers))


_specs: dict[str, EnvSpec] = {}
_loaded_entry_points: set[str] = set()
_lazy_families: dict[str, str] = {}
"""Family -> ``"module:function"`` that registers its ids, called on the family's first lookup."""
_lock = threading.RLock()


def _parse_id(env_id: str) -> dict[str, str]:
    match = _ID_PATTERN.match(env_id)
    if match is None:
        raise ValueError(
            f"invalid env id {env_id!r}: ids look like 'family:Name-vN', e.g. 'game:Wordle-v0' "
            "(family in lowercase, a name, then a version)"
        )
    return match.groupdict()


def gymnasium_id(id: str) -> str:
    """The id under which gymnasium knows a palaestra env: ``game:Wordle-v0`` -> ``palaestra/game-Wordle-v0``."""
    return f"{GYMNASIUM_NAMESPACE}/{id.replace(':', '-', 1)}"


def register(
    id: str,
    entry_point: str | EnvCreator,
    *,
    kwargs: Mapping[str, Any] | None = None,
    description: str | None = None,
    wrappers: Sequence[WrapperSpec] = (),
    variants: Mapping[str, Mapping[str, Any] | Variant] | None = None,
    override: bool = False,
) -> EnvSpec:
    """Register an env id.

    ``wrappers`` is a stack of :class:`WrapperSpec` that :func:`make` applies, innermost
    first. ``variants`` maps a suffix to extra kwargs (or a :class:`Variant` with extra
    wrappers) and registers one more id per entry, e.g.
    ``register("game:Wordle-v0", Wordle, variants={"Hard": {"difficulty": "hard"}})`` also
    registers ``game:Wordle-Hard-v0``. Re-registering an existing id raises unless
    ``override=True``.

    >>> register("demo:Echo-v0", "my_pkg.echo:EchoEnv", kwargs={"max_turns": 3})  # doctest: +SKIP
    """
    parts = _parse_id(id)
    base_kwargs = dict(kwargs or {})
    spec = EnvSpec(
        id=id,
        entry_point=entry_point,
        kwargs=base_kwargs,
        description=description,
        wrappers=tuple(wrappers),
    )
    specs = [spec]
    for suffix, extra in (variants or {}).items():
        variant_id = f"{parts['family']}:{parts['name']}-{suffix}-v{parts['version']}"
        _parse_id(variant_id)
        variant = extra if isinstance(extra, Variant) else Variant(kwargs=extra)
        specs.append(
            dataclasses.replace(
                spec,
                id=variant_id,
                kwargs={**base_kwargs, **variant.kwargs},
                wrappers=spec.wrappers + tuple(variant.wrappers),
                description=variant.description or spec.description,
            )
        )
    with _lock:
        clashes = [s.id for s in specs if s.id in _specs]
        if clashes and not override:
            raise ValueError(
                f"env id(s) already registered: {clashes}; pass override=True to replace"
            )
        for s in specs:
            _specs[s.id] = s
            gym.registry.pop(gymnasium_id(s.id), None)
            gym.register(
                id=gymnasium_id(s.id),
                entry_point="palaestra.core.registry:make",
                kwargs={"id": s.id},
                disable_env_checker=False,
            )
    return spec


def deregister(id: str) -> None:
    """Remove an id (mainly for tests)."""
    with _lock:
        _specs.pop(id, None)
        gym.registry.pop(gymnasium_id(id), None)


def load_plugins() -> list[str]:
    """Load env registrations from installed packages (entry-point group ``palaestra.envs``).

    Called automatically by :func:`make`, :func:`spec` and :func:`list_envs`; calling it again
    loads entry points installed since. A plugin that fails to load is reported as a
    warning and skipped. Returns the names of the entry points loaded by this call.
    """
    loaded = []
    with _lock:
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            key = f"{ep.name}={ep.value}"
            if key in _loaded_entry_points:
                continue
            _loaded_entry_points.add(key)
            try:
                target = ep.load()
                if callable(target):
                    target()
            except Exception as exc:
                warnings.warn(
                    f"palaestra plugin {ep.name!r} ({ep.value}) failed to load: {exc!r}",
                    stacklevel=2,
                )
                continue
            loaded.append(ep.name)
    return loaded


def register_lazy_family(family: str, loader: str) -> None:
    """Defer registering every id of ``family`` until one is first looked up.

    ``loader`` is a ``"module.path:function"`` string; :func:`make`/:func:`spec` call it the
    first time they meet an id of ``family``, and :func:`list_envs` when its pattern names the
    family (``"gem:*"``); an unfiltered ``list_envs()`` does not load it. Meant for families
    backed by a heavy optional package (GEM's envs register under ``gem:``).

    >>> register_lazy_family("gem", "palaestra.integrations.gem:register_gem_ids")  # doctest: +SKIP
    """
    with _lock:
        _lazy_families[family] = loader


def _load_lazy_family(family: str) -> None:
    with _lock:
        loader = _lazy_families.pop(family, None)
        if loader is not None:
            try:
                _load_entry_point(loader, f"family {family!r}")()
            except ImportError as exc:
                _lazy_families[family] = loader
                raise UnknownEnvError(
                    f"env ids of family {family!r} need a package that is not installed ({exc})"
                ) from exc


_plugins_loaded = False


def _ensure_plugins() -> None:
    global _plugins_loaded
    with _lock:
        if not _plugins_loaded:
            _plugins_loaded = True
            load_plugins()


def spec(id: str) -> EnvSpec:
    """The :class:`EnvSpec` registered under ``id``; unknown ids raise with suggestions."""
    _ensure_plugins()
    with _lock:
        found = _specs.get(id)
        if found is None and id.partition(":")[0] in _lazy_families:
            _load_lazy_family(id.partition(":")[0])
            found = _specs.get(id)
        if found is None:
            raise UnknownEnvError(_unknown_id_message(id))
        return found


def make(id: str, **kwargs: Any) -> Env:
    """Build a registered env; ``kwargs`` override the registered ones.

    >>> env = make("game:GuessTheNumber-v0", max_number=100)  # doctest: +SKIP
    """
    return spec(id).make(**kwargs)


def list_envs(pattern: str | None = None) -> list[str]:
    """Registered ids, sorted; ``pattern`` is a shell glob such as ``"game:*"``.

    Ids of a lazy family (:func:`register_lazy_family`) are listed only when ``pattern``
    names the family, e.g. ``"gem:*"``.
    """
    _ensure_plugins()
    with _lock:
        if pattern is not None:
            family = pattern.partition(":")[0]
            if family in _lazy_families:
                _load_lazy_family(family)
        ids = sorted(_specs)
    return [i for i in ids if pattern is None or fnmatch.fnmatchcase(i, pattern)]


def _unknown_id_message(id: str) -> str:
    known = list(_specs)
    by_lower = {k.lower(): k for k in known}
    guesses = [
        by_lower[g] for g in difflib.get_close_matches(id.lower(), list(by_lower), n=3, cutoff=0.6)
    ]
    message = f"unknown env id {id!r}"
    family = id.partition(":")[0]
    if ":" in id and not any(k.startswith(family + ":") for k in known):
        message += (
            f"; no env of family {family!r} is registered: import the module that registers it "
            "(on the command line: palaestra --import MODULE_OR_FILE ...) or install its "
            "package (entry point group 'palaestra.envs'; see docs/writing-envs.md)"
        )
    if guesses:
        message += "; did you mean " + " or ".join(repr(g) for g in guesses) + "?"
    elif not _ID_PATTERN.match(id):
        message += "; ids look like 'family:Name-vN', e.g. 'game:Wordle-v0'"
    return message + " (`palaestra list` shows every id)"
