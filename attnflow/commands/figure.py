"""``attnflow figure NAME``: make one of the paper's figures (PNG + .npz + .json)."""

import argparse
import importlib
import sys
import textwrap
import time

from attnflow.commands._args import at_least, output_folder, seed
from attnflow.figures import DESCRIPTIONS, FIGURES


def configure(parser):
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    width = max(len(name) for name in FIGURES)
    parser.epilog = "figures:\n" + "\n".join(
        f"  {name:<{width}}  {DESCRIPTIONS[name]}" for name in sorted(FIGURES)
    )
    parser.add_argument(
        "name", choices=sorted(FIGURES), metavar="NAME", help="which figure (listed below)"
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument(
        "--quick",
        action="store_const",
        const="quick",
        dest="preset",
        help="test-sized run (mostly compilation; sizes and times below)",
    )
    size.add_argument(
        "--full",
        action="store_const",
        const="full",
        dest="preset",
        help="paper resolution (normalization: d = 512, n = 64, 32 realisations, 200 layers)",
    )
    parser.set_defaults(preset="default")
    parser.add_argument("--seed", type=seed, default=0, help="PRNG seed in [0, 2**63 - 1]")
    parser.add_argument("--out", default="attnflow-figures", help="output folder")
    parser.add_argument(
        "--format",
        choices=("png", "svg", "pdf"),
        default="png",
        help="picture format: png (raster), svg or pdf (vector); default png",
    )
    parser.add_argument(
        "--dpi", type=at_least(10), default=200, help="resolution of raster output (default 200)"
    )
    parser.add_argument(
        "--compare",
        action="store_true",
        help="normalization only: overlay the survey's Fig. 4 means (digitised, shipped with "
        "attnflow) on the computed curves",
    )
    parser.add_argument(
        "--weights",
        choices=("survey", "identity-value"),
        default=None,
        help="normalization only: the law of the random weights; 'survey' (default): Q, K, V "
        "i.i.d. N(0, 1/d); 'identity-value': Q, K as before and V = I (attnflow before issue 41)",
    )
    parser.epilog += "\n\n" + textwrap.fill(
        "normalization (the survey's Fig. 4) by size, with times seen on a shared 2-core "
        "machine under load (indicative, not benchmarks): --quick d = 16, n = 8, 4 "
        "realisations, 40 layers (about 15 s of CPU, 80 s wall at load 10); default d = 128, "
        "n = 32, 16 realisations, 100 layers (47 s wall at load 6); --full d = 512, n = 64, 32 "
        "realisations, 200 layers (130 s of CPU, 8.4 min wall at load 12).",
        width=88,
    )


def run(args) -> int:
    import jax
    import matplotlib

    # Files only: no window, whatever the user's default backend (attnflow.plot leaves it alone).
    matplotlib.use("Agg")

    options = {
        key: value
        for key, value in (("compare", args.compare or None), ("weights", args.weights))
        if value is not None
    }
    if options and args.name != "normalization":
        print(
            f"attnflow figure {args.name}: --{'/--'.join(options)} applies to the normalization "
            "figure only",
            file=sys.stderr,
        )
        return 2

    from attnflow.figures._output import saving
    from attnflow.pretrained import ModelNotInstalledError

    module = importlib.import_module(FIGURES[args.name])
    params = {**module.PRESETS[args.preset], **options}
    # Missing weights or optional packages: said at once, before any work or output folder.
    try:
        getattr(module, "check_requirements", lambda params: None)(params)
    except ModelNotInstalledError as error:
        print(f"attnflow figure {args.name}: {error}", file=sys.stderr)
        return 1
    out = output_folder(args.out)  # before the minutes of compute, not after
    jax.config.update("jax_enable_x64", True)
    start = time.perf_counter()

    # One plain line per phase (readable in a log file); the phase engine's own bar counts
    # systems and shows compilation separately.
    print(f"{args.name} ({args.preset}): computing ...", file=sys.stderr, flush=True)

    try:
        with saving(format=args.format, dpi=args.dpi):
            paths = module.make(params, out, args.seed)
    except ModelNotInstalledError as error:  # the message gives the pip command
        print(f"attnflow figure {args.name}: {error}", file=sys.stderr)
        return 1
    print(f"{args.name} ({args.preset}) in {time.perf_counter() - start:.1f} s{_phases(paths)}:")
    for path in paths:
        print(f"  wrote {path}")
    return 0


def _phases(paths) -> str:
    """The phase timings a figure recorded in its JSON (load, compile, compute, plot, ...)."""
    import json

    for path in paths:
        if str(path).endswith(".json"):
            try:
                timings = json.loads(open(path).read()).get("timings_s", {})
            except (OSError, ValueError):
                return ""
            parts = [f"{k} {v:.1f} s" for k, v in timings.items() if isinstance(v, int | float)]
            return f" ({', '.join(parts)})" if parts else ""
    return ""
