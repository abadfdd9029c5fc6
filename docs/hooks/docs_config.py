"""The configuration reference, read from the code: every field of the config dataclasses
(`poet.config.RunConfig` and its sections, the built-in trainers' and curricula's `Options`),
its type, default, bounds and the comment that explains it.

Bounds are the checks themselves: `poet.config.validate` and each `Options.check()` run on the
defaults while recording what they test (`_check`'s messages and `out_of_range`'s rules), so a
bound changed in the code changes the page. A page asks for the reference with a line
`<!-- config-reference -->`.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any, Literal
from unittest import mock

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@dataclasses.dataclass
class FieldDoc:
    """One setting as the reference shows it."""

    key: str  # dotted, as `--set` takes it
    type: str
    default: str
    bounds: str
    doc: str
    where_only: bool


@dataclasses.dataclass
class SectionDoc:
    """One table of the reference: a config section or an `Options` dataclass."""

    title: str
    prefix: str
    intro: str
    fields: list[FieldDoc]


def type_text(tp: Any) -> str:
    """A type as a reader of a YAML file thinks of it."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return " or ".join(type_text(a) for a in inner) + " or null"
    if origin is Literal:
        return "one of " + ", ".join(f"`{a}`" for a in typing.get_args(tp))
    if origin is list:
        return f"list of {type_text(typing.get_args(tp)[0])}s"
    if origin is dict or tp is dict:
        return "mapping"
    return {int: "integer", float: "number", str: "string", bool: "boolean", Any: "any"}.get(tp, str(tp))


def default_text(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return "(required)"
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float):
        return f"`{value:g}`"
    if isinstance(value, int):
        return f"`{value:_}`".replace("_", ",") if abs(value) >= 10_000 else f"`{value}`"
    return f"`{value}`"


def field_comments(cls: type) -> dict[str, str]:
    """Each field's comment in the class source: the lines of `#` right above it and its own
    trailing `#` comment, joined."""
    comments: dict[str, str] = {}
    above: list[str] = []
    for line in inspect.getsource(cls).splitlines()[1:]:
        stripped = line.strip()
        if stripped.startswith("#"):
            above.append(stripped.lstrip("#").strip())
            continue
        match = re.match(r"\s{4}(\w+)\s*:\s*[^=]+(=.*)?$", line)
        if match and not stripped.startswith(("def ", "return", '"""')):
            trailing = re.search(r"\s#\s(.*)$", line)
            parts = above + ([trailing.group(1)] if trailing else [])
            comments[match.group(1)] = " ".join(parts)
        above = []
    return comments


def _field_list(cls: type) -> list[dataclasses.Field]:
    # an inline field's entries are sections of their own (trainer.es: the trainer tables below)
    return [f for f in dataclasses.fields(cls) if not _is_section(f) and not f.metadata.get("inline")]


def _is_section(f: dataclasses.Field) -> bool:
    return f.default_factory is not dataclasses.MISSING and dataclasses.is_dataclass(f.default_factory)


# ---------------------------------------------------------------- bounds, as the checks test them


def validate_bounds() -> dict[str, str]:
    """Dotted key -> the rule `poet.config.validate` checks it against, from its messages."""
    import poet.config as config

    messages: list[str] = []

    def record(cond: bool, message: str) -> None:
        messages.append(message)

    with mock.patch.object(config, "_check", record):
        config.validate(config.RunConfig())
    bounds: dict[str, str] = {}
    for message in messages:
        key = re.match(r"[a-z_][\w.]*", message).group(0)
        rule = message[len(key) :].lstrip(": ")
        rule = re.sub(r"[,;] got .*$", "", rule)
        rule = re.sub(r"\s*\((?:-?[\d.]+|None)\)", "", rule).strip()  # the values the message quotes
        bounds[key] = rule
    return bounds


def options_bounds(cls: type) -> dict[str, str]:
    """Field -> rule of an `Options` dataclass, recorded from its `check()` on the defaults:
    the rules it gives `out_of_range`, and any other problem it reports for a default."""
    if not callable(getattr(cls, "check", None)):
        return {}
    rules: dict[str, str] = {}

    def record(options: Any, names: Any, ok: Any, rule: str) -> list:
        for name in names:
            rules[name] = f"must be {rule}"
        return []

    modules = {sys.modules[c.__module__] for c in cls.__mro__ if c.__module__ in sys.modules}
    patches = [mock.patch.object(m, "out_of_range", record) for m in modules if hasattr(m, "out_of_range")]
    for p in patches:
        p.start()
    try:
        problems = cls().check()
    finally:
        for p in patches:
            p.stop()
    for name, problem in problems:
        rules.setdefault(name, f"required: {problem}")
    return rules


# ---------------------------------------------------------------- sections


def section_doc(cls: type, prefix: str, title: str, bounds: dict[str, str], where_only: bool = False) -> SectionDoc:
    """The fields of dataclass `cls` (sections apart) under dotted `prefix`."""
    hints = typing.get_type_hints(cls)
    comments: dict[str, str] = {}
    for base in reversed([c for c in cls.__mro__ if dataclasses.is_dataclass(c)]):
        comments.update({k: v for k, v in field_comments(base).items() if v})
    fields = []
    for f in _field_list(cls):
        key = f"{prefix}{f.name}"
        fields.append(
            FieldDoc(
                key=key,
                type=type_text(hints[f.name]),
                default=default_text(f),
                bounds=bounds.get(key, bounds.get(f.name, "")),
                doc=comments.get(f.name, ""),
                where_only=where_only or f.metadata.get("changes_results", True) is False,
            )
        )
    intro = inspect.getdoc(cls) or ""
    return SectionDoc(title, prefix, intro, fields)


def sections() -> list[SectionDoc]:
    """Every table of the reference, in the order of a config file."""
    from poet.config import RunConfig
    from poet.curricula import CURRICULA
    from poet.policies import MLP
    from poet.policies.kinds import POLICY_KINDS, options_class, resolve_kind
    from poet.trainers import TRAINERS

    bounds = validate_bounds()
    out = [section_doc(RunConfig, "", "Top level", bounds)]
    for f in dataclasses.fields(RunConfig):
        if _is_section(f):
            where_only = f.metadata.get("changes_results", True) is False
            out.append(section_doc(f.default_factory, f"{f.name}.", f"`{f.name}`", bounds, where_only))
    for name, cls in TRAINERS.items():
        options = getattr(cls, "Options", None)
        if options is not None:
            out.append(
                section_doc(
                    options, f"trainer.{name}.", f"`trainer.{name}` ({options.__name__})", options_bounds(options)
                )
            )
    for name in POLICY_KINDS:
        options = options_class(resolve_kind(name)) if name != MLP else None
        if options is not None:
            out.append(
                section_doc(
                    options,
                    "policy.options.",
                    f"`policy.options` of `{name}` ({options.__name__})",
                    options_bounds(options),
                )
            )
    for name, cls in CURRICULA.items():
        options = getattr(cls, "Options", None)
        if options is not None:
            out.append(
                section_doc(
                    options,
                    "curriculum_options.",
                    f"`curriculum_options` of `{name}` ({options.__name__})",
                    options_bounds(options),
                )
            )
    return out


def all_keys() -> list[str]:
    """Every dotted key the reference lists (curriculum options once per curriculum)."""
    return [f.key for s in sections() for f in s.fields]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown() -> str:
    """The reference as markdown: one table per section."""
    out = []
    for s in sections():
        out += [f"### {s.title}", ""]
        if s.intro:
            out += [s.intro, ""]
        out += ["| setting | type | default | bounds | what it is |", "|---|---|---|---|---|"]
        for f in s.fields:
            key = f"`{f.key}`" + (" (where only)" if f.where_only else "")
            out.append(f"| {key} | {_cell(f.type)} | {_cell(f.default)} | {_cell(f.bounds)} | {_cell(f.doc)} |")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(markdown())
