"""The API pages render every documented parameter as its own row (issue #34, friction 1): each
docstring of a ``::: name`` entry in docs/api/*.md is parsed with griffe's Google parser, as
mkdocstrings does for the site, and every signature parameter that the Args section names
("name:") must come out as a parameter of its own, not inside another's description (a parameter
written after another on one line, or indented like a continuation line, is swallowed)."""

import importlib
import inspect
import re
from pathlib import Path

import griffe

ROOT = Path(__file__).resolve().parent.parent


def _entries():
    names = []
    for page in sorted((ROOT / "docs" / "api").glob("*.md")):
        names += re.findall(r"^::: ([\w.]+)", page.read_text(), re.M)
    return sorted(set(names))


def _resolve(dotted):
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        for attr in parts[k:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


def _args_block(doc):
    match = re.search(r"^(\s*)Args:\n(.*?)(?=^\1\S|\Z)", doc, re.M | re.S)
    return match.group(2) if match else ""


def _callables(obj):
    if inspect.isclass(obj):
        yield obj.__name__, obj, inspect.getdoc(obj) or ""
        for name, member in vars(obj).items():
            if inspect.isfunction(member) and not name.startswith("_") and member.__doc__:
                yield f"{obj.__name__}.{name}", member, inspect.getdoc(member)
    elif callable(obj):
        yield getattr(obj, "__name__", "?"), obj, inspect.getdoc(obj) or ""


def test_every_named_parameter_renders_as_its_own_row():
    entries = _entries()
    assert len(entries) > 100
    problems, checked = [], 0
    for dotted in entries:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            obj = _resolve(dotted)
        for label, fn, doc in _callables(obj):
            block = _args_block(doc)
            if not block:
                continue
            try:
                params = set(inspect.signature(fn).parameters)
            except (TypeError, ValueError):
                continue
            sections = griffe.Docstring(doc, lineno=1).parse("google", warn_unknown_params=False)
            parsed = set()
            for section in sections:
                if section.kind == griffe.DocstringSectionKind.parameters:
                    for p in section.value:
                        parsed |= {name.strip() for name in p.name.split(",")}
            checked += 1
            for p in params:
                if re.search(rf"(^|\s|,){re.escape(p)}(,\s*\w+)*:\s", block) and p not in parsed:
                    problems.append(f"{dotted} ({label}): `{p}` is swallowed by another row")
    assert checked > 50
    assert not problems, "\n".join(problems)
