"""Each option declared once, as a dataclass field with an :class:`Option` in its metadata.

A field of :class:`~loadersearch.LoaderConfig`, :class:`~loadersearch.WorkloadSpec`,
:class:`~loadersearch.MeasurePlan`, :class:`~loadersearch.PipelineSpec` or
:class:`~loadersearch.search.StudySettings` declared with :func:`opt` is an option the
user can set; everything else about it is derived from that one declaration: its command-line
flag, type and help (``cli/_options.py``), its spec-file table, key and type
(``search/_settings.py``), its ``tune()``/``bench()`` argument (``_api.py``), and the checks of
its bounds and choices (:func:`check_fields`, called by the dataclass itself). A field without
an :class:`Option` is internal: no flag, refused in a spec file, not an API argument.

This module imports nothing of loadersearch, so that every layer can use it.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from typing import Any, TypeVar

# What a value is: how the command line reads it, and what a spec file's value must be (the
# spec file's message says "KEY must be <kind> but got ...").
WHOLE, NUMBER, TEXT, FLAG = "a whole number", "a number", "a string", "true or false"
PAIR, SIZE = "two numbers, e.g. [4, 7]", 'a size, e.g. "6GiB"'
PATH, DIR = "a path", "a directory"  # strings; the command line says PATH or DIRECTORY
REF = "a reference, e.g. 'mypkg.data:make_dataset'"  # a pipeline part ("module:name")
TABLE = "a table of keyword arguments"
# A study option whose flag turns it off (--no-baselines) or on (--allow-mixed-hardware):
# true or false in a spec file and the API, a flag that is given or not on the command line.
OFF, ON = "off", "on"


@dataclass(frozen=True)
class Option:
    """How the user sets one field:

    - ``help``: the command line's help; ``{default}`` in it stands for the field's default;
    - ``kind``: what a value is (:data:`WHOLE`, :data:`SIZE`, ...); ``choices``, ``low`` and
      ``high`` (``*_open``: the bound itself excluded): what values are allowed;
    - ``flags``: its command-line flags (None: ``--field-name``; ``()``: none); ``dest``: the
      command's parameter name (None: the field's); ``metavar``;
    - ``key``: its spec-file key (None: the field's name), ``keys``: other keys that set it
      too, ``section``: its table (None: its class's), ``spec``: whether a file may set it;
    - ``api``: its ``tune()``/``bench()`` argument (``""``: the field's name; None: none);
    - ``noun``: its name in "Unknown NOUN 'x'; choose one of ..." (None: the field's name).
    """

    help: str = ""
    kind: str = TEXT
    flags: tuple[str, ...] | None = None
    dest: str | None = None
    choices: tuple[str, ...] = ()
    low: float | None = None
    low_open: bool = False
    high: float | None = None
    high_open: bool = False
    metavar: str | None = None
    key: str | None = None
    keys: tuple[str, ...] = ()
    section: str | None = None
    api: str | None = ""
    spec: bool = True
    noun: str | None = None

    def cli_flags(self, name: str) -> tuple[str, ...]:
        return ("--" + name.replace("_", "-"),) if self.flags is None else self.flags

    def api_name(self, name: str) -> str | None:
        return name if self.api == "" else self.api

    def help_for(self, default: Any) -> str:
        return self.help.format(default=default) if "{default" in self.help else self.help


def opt(default: Any = dataclasses.MISSING, **option: Any) -> Any:
    """A dataclass field with ``default`` (a ``list`` or ``dict`` default is copied per
    instance) declared as an option (:class:`Option`'s fields as keywords)."""
    meta = {"option": Option(**option)}
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def declared(cls: type) -> dict[str, Option]:
    """The options of dataclass ``cls``, by field name, in field order."""
    return {
        f.name: f.metadata["option"] for f in dataclasses.fields(cls) if "option" in f.metadata
    }


def default_of(cls: type, name: str) -> Any:
    """The one default of field ``name`` of dataclass ``cls``."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def help_of(cls: type, name: str) -> str:
    """The help text of option ``name`` of ``cls``, its default filled in."""
    return declared(cls)[name].help_for(default_of(cls, name))


def check_fields(obj: Any) -> None:
    """ValueError naming the field when one of ``obj``'s declared options is outside its
    choices or bounds (None is never checked: it means "not set")."""
    for name, o in declared(type(obj)).items():
        value = getattr(obj, name)
        if value is None:
            continue
        if o.choices and value not in o.choices:
            noun = o.noun or name
            raise ValueError(f"Unknown {noun} {value!r}; choose one of {', '.join(o.choices)}.")
        if o.low is None and o.high is None:
            continue
        low = -float("inf") if o.low is None else o.low
        high = float("inf") if o.high is None else o.high
        inside = (value > low if o.low_open else value >= low) and (
            value < high if o.high_open else value <= high
        )  # written so that nan is outside
        if inside:
            continue
        if o.high is not None:
            bounds = f"{'(' if o.low_open else '['}{low:g}, {high:g}{')' if o.high_open else ']'}"
            raise ValueError(f"{name} must be in {bounds} but got {value}.")
        if o.low == 0:
            rule = "must be positive" if o.low_open else "cannot be negative"
        else:
            rule = f"must be at least {low:g}"
        raise ValueError(f"{name} {rule} but got {value}.")


def describe(kind: str) -> str:
    """What a spec file's value of ``kind`` must be, in words."""
    return {PATH: TEXT, DIR: TEXT, OFF: FLAG, ON: FLAG}.get(kind, kind)


def conforms(value: Any, kind: str) -> bool:
    """Whether a spec file's (TOML's) ``value`` is of ``kind``."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == WHOLE:
        return number and float(value).is_integer()
    if kind == NUMBER:
        return number
    if kind in (TEXT, PATH, DIR, REF):
        return isinstance(value, str)
    if kind in (FLAG, OFF, ON):
        return isinstance(value, bool)
    if kind == PAIR:
        return isinstance(value, (list, tuple)) and all(conforms(v, NUMBER) for v in value)
    if kind == SIZE:
        return isinstance(value, str) or number
    if kind == TABLE:
        return isinstance(value, dict)
    return True


_SIZE_UNITS = {
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "kib": 1024,
    "m": 1000**2,
    "mb": 1000**2,
    "mib": 1024**2,
    "g": 1000**3,
    "gb": 1000**3,
    "gib": 1024**3,
    "t": 1000**4,
    "tb": 1000**4,
    "tib": 1024**4,
}
_UNITS_HELP = "KiB/MiB/GiB are powers of 1024, K/M/G and KB/MB/GB powers of 1000, B bytes"


def parse_size(text: str | int | float) -> int:
    """Bytes from a size such as ``6GiB``, ``6G``, ``6000MiB``, ``512mb`` or ``1234B``: the one
    reader of sizes (the command line, spec files and the Python API all use it).

    Binary units (KiB, MiB, GiB, TiB) are powers of 1024; K/M/G/T and KB/MB/GB/TB are powers of
    1000 (as `df -H` and GPU vendors print them); B is bytes. A number without a unit is
    refused: ``--vram-cap 12`` meant 12 GiB, not 12 bytes, and a study created with 12 bytes
    would refuse the corrected value as a different spec.
    """
    if isinstance(text, bool):
        raise ValueError(f"cannot read the size {text!r}: write a number and a unit, e.g. 6GiB.")
    if isinstance(text, (int, float)):
        number, unit = str(text), ""
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", str(text))
        if not m or (m.group(2) and m.group(2).lower() not in _SIZE_UNITS):
            raise ValueError(
                f"cannot read the size {text!r}: write a number and a unit, e.g. 6GiB, 6G or "
                f"6000MiB ({_UNITS_HELP})."
            )
        number, unit = m.group(1), m.group(2).lower()
    if float(number) <= 0:
        raise ValueError(f"the size must be positive but got {text!r}; e.g. 6GiB.")
    if not unit:
        # A long number is a count of bytes whose B was left out; a spec file writes the
        # size as a quoted string.
        guess = f"{number}{'B' if float(number) >= 2**20 else 'GiB'}"
        guess = guess if isinstance(text, str) else f'"{guess}"'
        raise ValueError(
            f"the size {text!r} has no unit: {guess}? Write the unit ({_UNITS_HELP})."
        )
    size = int(round(float(number) * _SIZE_UNITS[unit]))
    if size <= 0:
        raise ValueError(f"the size must be positive but got {text!r}; e.g. 6GiB.")
    return size


# "package.module:Name.attr": what a new Python process can import (see workload/_refs.py)
_REF = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def check_ref(ref: Any, part: str) -> str:
    """``ref`` if it reads as ``"module:qualname"``, else ValueError naming ``part``."""
    if not isinstance(ref, str) or not _REF.fullmatch(ref):
        raise ValueError(
            f"the {part} reference must read 'module:name' (e.g. 'mypkg.data:make_dataset', "
            f"importable by a new Python process) but got {ref!r}."
        )
    return ref


def json_kwargs(kwargs: Any, part: str) -> dict[str, Any]:
    """``kwargs`` as they come back from the study's JSON (tuples become lists), or ValueError
    when they cannot be stored."""
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise ValueError(f"{part}_kwargs must map names to values but got {kwargs!r}.")
    try:
        return json.loads(json.dumps(kwargs, allow_nan=False))
    except (TypeError, ValueError) as e:
        raise ValueError(
            f"{part}_kwargs {kwargs!r} cannot be stored in the study ({e}): use JSON values "
            "(numbers, strings, booleans, lists, dicts) and build other objects inside the "
            f"{part} factory."
        ) from e


class Record:
    """A dataclass that survives JSON: ``from_dict`` leaves out keys it does not know (a study
    stored by another version)."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls: type[_R], data: dict[str, Any]) -> _R:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


_R = TypeVar("_R", bound=Record)
