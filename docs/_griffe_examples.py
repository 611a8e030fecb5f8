"""Griffe extension for attnflow's docstrings, applied when the API reference is built.

- "Example:" (singular) becomes "Examples:", the title under which the Google parser renders
  doctests as code;
- mathematics that Markdown would read as a link, such as 𝒳[μ](x) or A[i][j], is escaped
  (outside doctests), so that only real links and the pointers below become links;
- Sphinx roles (:func:`normalize`) become cross-references when they name a public object;
- functions and classes whose docstring is set at run time (``f.__doc__ = ...``), which static
  analysis cannot see, get their run-time docstring;
- repository pointers become links: "docs/maths.md §1.12" to the anchor ``math-1-12`` of the
  maths page, "docs/NAME.md" to the page's top anchor, "docs/NAME.md#anchor" to that anchor.
  Plain-text readers (``help``) see a path that exists in the repository.
"""

import importlib
import inspect
import re

import griffe

_SINGULAR = re.compile(r"^(\s*)Example:\s*$", re.MULTILINE)
_ROLE = re.compile(r":(?:func|class|meth|attr|data|mod|obj):`~?([A-Za-z_][\w.]*)`")
_MATHS = re.compile(r"docs/maths\.md §(\d+)(?:\.(\d+))?((?:–\d+)?)")
_PAGE = re.compile(r"docs/([a-z_-]+)\.md(?:#([a-z0-9-]+))?")


def math_anchor(section: str, subsection: str | None) -> str:
    """The anchor of "§section.subsection" on the maths page (``math-1-12``, ``math-4``)."""
    return f"math-{section}" + (f"-{subsection}" if subsection else "")


def _public_identifier(name: str) -> str | None:
    parts = name.removeprefix("attnflow.").split(".")
    module = importlib.import_module("attnflow")
    if parts[0] in ("theory", "plot") and len(parts) == 2:
        module = importlib.import_module(f"attnflow.{parts[0]}")
        parts = parts[1:]
    if len(parts) != 1 or parts[0].startswith("_"):
        return None
    public = getattr(module, "__all__", None)
    if public is not None:  # a lazy namespace: no hasattr, which would warn for moved names
        return f"{module.__name__}.{parts[0]}" if parts[0] in public else None
    return f"{module.__name__}.{parts[0]}" if hasattr(module, parts[0]) else None


def _role(match: re.Match) -> str:
    name = match.group(1)
    identifier = _public_identifier(name)
    return f"[`{name}`][{identifier}]" if identifier else f"`{name}`"


def _maths(match: re.Match) -> str:
    section, subsection, upto = match.group(1), match.group(2), match.group(3)
    number = section + (f".{subsection}" if subsection else "") + upto
    return f"[Mathematics §{number}][{math_anchor(section, subsection)}]"


def _page(match: re.Match) -> str:
    page, anchor = match.group(1), match.group(2)
    title = page.replace("-", " ").replace("_", " ").capitalize()
    return f"[{title}][{anchor or page}]"


_INLINE_LINK = re.compile(r"\[([^\[\]\n]*)\]\(([^()\s]*)\)")
_REFERENCE_LINK = re.compile(r"\[([^\[\]\n]*)\]\[([^\[\]\n]*)\]")


def _escape_math_brackets(text: str) -> str:
    """Escape ``[a](b)`` unless b looks like a link target (has "/", ".", "#" or ":"), and every
    ``[a][b]``; doctest lines (from ">>>" to the next blank line) are left alone."""

    def inline(match: re.Match) -> str:
        if any(c in match.group(2) for c in "/.#:"):
            return match.group(0)
        return f"\\[{match.group(1)}\\]({match.group(2)})"

    def reference(match: re.Match) -> str:
        return f"\\[{match.group(1)}\\]\\[{match.group(2)}\\]"

    lines, in_doctest = [], False
    for line in text.split("\n"):
        stripped = line.strip()
        in_doctest = stripped.startswith(">>>") or (in_doctest and stripped != "")
        if not in_doctest:
            line = _REFERENCE_LINK.sub(reference, _INLINE_LINK.sub(inline, line))
        lines.append(line)
    return "\n".join(lines)


def rewrite(text: str) -> str:
    text = _escape_math_brackets(_SINGULAR.sub(r"\1Examples:", text))
    text = _ROLE.sub(_role, text)
    text = _MATHS.sub(_maths, text)
    return _PAGE.sub(_page, text)


def _runtime_docstring(obj) -> str | None:
    try:
        value = importlib.import_module(obj.module.path)
        for part in obj.path.removeprefix(obj.module.path + ".").split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError):
        return None
    return inspect.getdoc(value)


class AttnflowDocstrings(griffe.Extension):
    def on_instance(self, *, obj, **kwargs):
        if obj.docstring is None and obj.kind in (griffe.Kind.FUNCTION, griffe.Kind.CLASS):
            doc = _runtime_docstring(obj)
            if doc:
                obj.docstring = griffe.Docstring(doc, parent=obj)
        if obj.docstring is not None:
            obj.docstring.value = rewrite(obj.docstring.value)
