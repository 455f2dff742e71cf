"""`ckptwatch postmortem --lake LAKE --job J [--step S] --out FILE.html`: one stall's notebook."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ckptwatch.settings import default_lake


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``postmortem`` command."""
    p = sub.add_parser(
        "postmortem", help="one stall's post-mortem notebook, executed and exported as HTML",
        description="Execute notebooks/stall_postmortem.ipynb for one stall (its parameters "
        "injected papermill-style) and export it as one self-contained HTML file: the "
        "per-rank timeline of the stalled checkpoint coloured by phase, rank durations "
        "against the job's normal, pause / PortXmitWait / gc_active / free blocks / metadata "
        "latency around the window with the slow ranks' hosts highlighted, and the "
        "attribution's evidence. Progress goes to stderr, one line per cell. Needs the "
        "notebooks extra (nbclient, nbconvert, ipykernel, matplotlib).")
    p.add_argument("--lake", type=Path, default=default_lake(),
                   help="lake directory (default: %(default)s; env CKPTWATCH_LAKE)")
    p.add_argument("--job", required=True, help="job id")
    p.add_argument("--step", type=int, default=None,
                   help="the stalled checkpoint's step (default: the job's worst stall)")
    p.add_argument("--out", type=Path, default=None, metavar="FILE.html",
                   help="HTML file to write, in a directory that exists (default: "
                   "postmortem-JOB-STEP.html in the working directory, JOB reduced to "
                   "[A-Za-z0-9._-])")
    p.add_argument("--with-code", action="store_true",
                   help="keep the notebook's code cells in the HTML (default: outputs only)")
    p.add_argument("--save-notebook", type=Path, default=None, metavar="FILE.ipynb",
                   help="also keep the executed notebook")
    p.add_argument("--notebook", type=Path, default=None, metavar="FILE.ipynb",
                   help="the notebook to run (default: notebooks/stall_postmortem.ipynb)")
    p.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                   help="longest a cell may run (default: %(default)s)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Execute the notebook and write the HTML."""
    from ckptwatch.errors import MissingExtraError

    try:
        import nbclient  # noqa: F401
        import nbconvert  # noqa: F401
    except ImportError as exc:
        raise MissingExtraError(f"{exc.name} is not installed: install the notebooks extra "
                                "(pip install 'ckptwatch[notebooks]')") from None
    from ckptwatch.report.notebook import check_target, default_output, execute_notebook
    from ckptwatch.report.postmortem import open_stall
    from ckptwatch.safetext import escape_controls

    for path, flag in ((args.out, "--out"), (args.save_notebook, "--save-notebook")):
        if path is not None:  # before anything slow
            check_target(path, flag)
    step = args.step
    if step is None:  # resolve the worst stall once, to name the output after it
        case = open_stall(args.lake, args.job)
        step = case.step
        case.con.close()
        print(escape_controls(
            f"ckptwatch postmortem: no --step given: the worst stall of {args.job} is step "
            f"{step} ({case.report['barrier_s']:.1f} s, {case.report['cause']})"),
            file=sys.stderr)
    out = args.out or default_output(args.job, step)
    result = execute_notebook(args.lake, args.job, step, out, notebook=args.notebook,
                              with_code=args.with_code, executed_path=args.save_notebook,
                              timeout_s=args.timeout)
    print(escape_controls(f"post-mortem of {args.job} step {step}: {result.html} "
                          f"({result.n_images} figures, {result.elapsed_s:.1f} s)"))
    if args.save_notebook:
        print(escape_controls(f"executed notebook: {args.save_notebook}"))
    return 0
