"""Griffe extension for attnflow's docstrings, applied when the API reference is built.

- "Example:" (singular) becomes "Examples:", the title under which the Google parser renders
  doctests as code;
- mathematics that Markdown would read as a link, such as 𝒳[μ](x) or A[i][j], is escaped
  (outside doctests and indented formula blocks, which Markdown shows verbatim), so that only
  real links and the pointers below become links;
- grouped parameters ("rtol, atol: ...") are split into one entry per name, so that each gets
  its signature's default instead of being marked required;
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

    lines, in_doctest, in_block, previous = [], False, False, ""
    for line in text.split("\n"):
        stripped = line.strip()
        in_doctest = stripped.startswith(">>>") or (in_doctest and stripped != "")
        # An indented block after a blank line (not a section's entries) is a code block.
        indented = line.startswith("    ") and stripped != ""
        in_block = indented and (in_block or (previous == "" and not _in_section(lines)))
        previous = stripped
        if not in_doctest and not in_block:
            line = _REFERENCE_LINK.sub(reference, _INLINE_LINK.sub(inline, line))
        lines.append(line)
    return "\n".join(lines)


_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Returns|Raises|Attributes|Yields|Examples?|Note|Notes|"
    r"Warning|Warnings|Other Parameters):\s*$"
)


def _in_section(lines: list[str]) -> bool:
    """Whether the text so far ends inside a Google section (its header not followed by an
    unindented line)."""
    for line in reversed(lines):
        if _SECTION.match(line):
            return True
        if line.strip() and not line.startswith(" "):
            return False
    return False


_GROUPED = re.compile(r"^(\s+)(\*{0,2}\w+(?:, \*{0,2}\w+)+)(\s*\([^)]*\))?:(.*)$")


def _split_grouped_parameters(text: str) -> str:
    """Inside "Args:", an entry "a, b: description" (with its continuation lines) becomes one
    entry per name with the same description."""
    lines = text.split("\n")
    out, i, in_args = [], 0, False
    while i < len(lines):
        line = lines[i]
        if line.strip() in ("Args:", "Arguments:", "Parameters:"):
            in_args = True
        elif line.strip() and not line.startswith(" "):
            in_args = False
        match = _GROUPED.match(line) if in_args else None
        if not match:
            out.append(line)
            i += 1
            continue
        indent, names, kind, rest = match.groups()
        body, i = [], i + 1
        while i < len(lines) and lines[i].startswith(indent + " ") and lines[i].strip():
            body.append(lines[i])
            i += 1
        for name in names.split(", "):
            out.append(f"{indent}{name}{kind or ''}:{rest}")
            out.extend(body)
    return "\n".join(out)


def rewrite(text: str) -> str:
    text = _split_grouped_parameters(text)
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
    # Its own docstring only: inspect.getdoc would inherit object.__init__'s "Initialize self.
    # See help(type(self))..." for an __init__ without one.
    own = getattr(value, "__doc__", None)
    if not isinstance(own, str) or not own.strip():
        return None
    inherited = getattr(getattr(object, getattr(value, "__name__", ""), None), "__doc__", None)
    if own == inherited:
        return None
    return inspect.cleandoc(own)


class AttnflowDocstrings(griffe.Extension):
    def on_instance(self, *, obj, **kwargs):
        if obj.docstring is None and obj.kind in (griffe.Kind.FUNCTION, griffe.Kind.CLASS):
            doc = _runtime_docstring(obj)
            if doc:
                obj.docstring = griffe.Docstring(doc, parent=obj)
        if obj.docstring is not None:
            obj.docstring.value = rewrite(obj.docstring.value)
