"""The work of a compiled program, counted (not timed): XLA's cost analysis, the optimised
HLO's op counts and size, and the phase engine's step as :func:`attnflow.phase_diagram`
compiles it. Used by tests/test_counted_work.py and benchmarks/phase_step_ops.py (which runs
it against older trees too, so it uses no attnflow name younger than the phase engine)."""

import collections
import re

COSTS = ("flops", "transcendentals", "bytes accessed")

_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*")
_OPCODE = re.compile(r"\s*([a-z][a-z0-9\-]*)\(")
_METADATA = re.compile(r",?\s*metadata=\{[^{}]*\}")


def hlo_instructions(text: str) -> list[str]:
    """The instruction lines of an HLO module's text (every computation), without their
    ``metadata={...}`` (source names and lines; the module's stack-frame tables are left out)."""
    return [_METADATA.sub("", line) for line in text.splitlines() if _INSTRUCTION.match(line)]


def hlo_op_counts(text: str) -> collections.Counter:
    """Instructions of each op kind in an HLO module's text (every computation)."""
    counts = collections.Counter()
    for line in hlo_instructions(text):
        rest = line[_INSTRUCTION.match(line).end() :]
        if rest.startswith("("):  # a tuple shape: skip to its closing parenthesis
            depth = 0
            for i, char in enumerate(rest):
                depth += {"(": 1, ")": -1}.get(char, 0)
                if depth == 0:
                    rest = rest[i + 1 :]
                    break
        else:
            rest = rest.split(" ", 1)[1] if " " in rest else ""
        opcode = _OPCODE.match(rest)
        if opcode is not None:
            counts[opcode.group(1)] += 1
    return counts


def program_counts(compiled) -> dict[str, float]:
    """cost_analysis() FLOPs, transcendentals and bytes accessed (a ``while`` body counted
    once), op counts per kind (``"op <kind>"``) and HLO size (instructions, and their
    characters without metadata) of a compiled program (``jax.jit(f).lower(...).compile()``)."""
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    text = compiled.as_text()
    ops = hlo_op_counts(text)
    counts = {name: float(cost.get(name, 0.0)) for name in COSTS}
    counts["hlo instructions"] = sum(ops.values())
    counts["hlo characters"] = sum(map(len, hlo_instructions(text)))
    counts.update({f"op {kind}": n for kind, n in sorted(ops.items())})
    return counts


class _Captured(Exception):
    pass


def phase_step(key, **options):
    """(the compiled step, its argument): the first call of the phase engine's compiled step
    (``_run._solve_call``) that ``phase_diagram(key, **options)`` makes, compiled alone; the
    call itself is stopped before it runs."""
    from attnflow._phase import _run

    box = {}

    def record(pb, *, slots, refill):
        box.update(pb=pb, slots=slots, refill=refill)
        raise _Captured

    import attnflow as af

    original = _run._solve_call
    _run._solve_call = record
    try:
        af.phase_diagram(key, **options)
    except _Captured:
        pass
    finally:
        _run._solve_call = original
    lowered = original.lower(box["pb"], slots=box["slots"], refill=box["refill"])
    return lowered.compile(), box["pb"]
