"""Running the post-mortem notebook for one stall (``ckptwatch postmortem``).

:func:`execute_notebook` runs ``notebooks/stall_postmortem.ipynb`` with nbclient in this
Python's kernel (papermill-style: the values are injected in a cell after the one tagged
``parameters``, :func:`inject_parameters`) and exports it as one self-contained HTML file with
nbconvert. The data it shows is :mod:`ckptwatch.report.postmortem`.

The kernel's connection file and IPC sockets live in a temporary directory of their own (not
the working directory, not the Jupyter runtime directory), so the post-mortem runs from a
read-only directory. The HTML goes where the caller says (:func:`default_output`: a name made
of ``[A-Za-z0-9._-]`` only, in the working directory), in a directory that must exist.
"""

from __future__ import annotations

import copy
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ckptwatch.errors import NotebookError
from ckptwatch.report.postmortem import open_stall
from ckptwatch.safetext import escape_controls, safe_file_part
from ckptwatch.settings import notebook_path

#: Default notebook (``ckptwatch postmortem --notebook`` overrides).
NOTEBOOK = notebook_path()


@dataclass(frozen=True)
class NotebookRun:
    """One executed post-mortem notebook."""

    html: Path
    notebook: Any
    n_images: int
    elapsed_s: float


def inject_parameters(nb: Any, values: dict[str, Any]) -> Any:
    """A copy of ``nb`` with a cell tagged ``injected-parameters`` assigning ``values``,
    placed after the cell tagged ``parameters`` (papermill's convention), replacing an
    injected cell already there. Values are written with ``repr``."""
    import nbformat

    out = copy.deepcopy(nb)
    cells = [c for c in out.cells
             if "injected-parameters" not in c.get("metadata", {}).get("tags", [])]
    source = "# Parameters injected by ckptwatch postmortem\n" + "".join(
        f"{k} = {v!r}\n" for k, v in values.items())
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": ["injected-parameters"]})
    at = next((i + 1 for i, c in enumerate(cells)
               if "parameters" in c.get("metadata", {}).get("tags", [])), 0)
    cells.insert(at, cell)
    out.cells = cells
    return out


#: nbconvert's JupyterLab template without the scripts it loads from a CDN (require.js,
#: MathJax, mermaid): the post-mortem has no widgets or formulas and must open offline. Figures
#: get their cell's title (its first comment line) as alternative text.
_TEMPLATE = """{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{% block data_png scoped %}
<div class="jp-RenderedImage jp-OutputArea-output {{ extra_class }}">
<img alt="{{ cell.source.split('\\n')[0].lstrip('# ') | escape_html }}"
 src="data:image/png;base64,{{ output.data['image/png'] | escape_html }}">
</div>
{%- endblock data_png %}
"""


def _cell_title(cell: Any) -> str:
    for line in str(cell.source).splitlines():
        text = line.strip().lstrip("#").strip()
        if text and not text.startswith("%"):
            return text[:60]
    return "(empty cell)"


def default_output(job: str, step: int) -> Path:
    """``postmortem-JOB-STEP.html`` in the working directory, whatever the job id holds: JOB
    reduced to ``[A-Za-z0-9._-]`` (:func:`ckptwatch.safetext.safe_file_part`), so the name is
    one path component that cannot leave the directory."""
    return Path(f"postmortem-{safe_file_part(job)}-{int(step)}.html")


def check_target(path: Path, what: str) -> None:
    """Raise :class:`NotebookError` unless ``path`` can be written: its directory exists (it
    is not created), is a directory and is writable, and ``path`` is not a directory."""
    folder = path.parent
    if not folder.is_dir():
        raise NotebookError(f"cannot write {path}: directory {folder} does not exist (create "
                            f"it first, or choose another {what})")
    if path.is_dir():
        raise NotebookError(f"cannot write {path}: it is a directory (choose a file name "
                            f"for {what})")
    if not os.access(folder, os.W_OK):
        raise NotebookError(f"cannot write {path}: directory {folder.absolute()} is not "
                            f"writable (choose another {what})")


def _this_python_kernel(runtime_dir: Path) -> Any:
    """A kernel manager for this interpreter (the one ckptwatch is installed in), whatever
    kernelspecs the machine has, with its connection file and IPC sockets in
    ``runtime_dir``."""
    from ckptwatch.settings.prefect_env import use_cache_for_tool_state

    use_cache_for_tool_state()  # the kernel's IPython profile: not in ~/.ipython
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager

    class _ThisPython(KernelSpecManager):
        def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
            return KernelSpec(argv=[sys.executable, "-m", "ipykernel_launcher", "-f",
                                    "{connection_file}"],
                              display_name="Python (ckptwatch)", language="python")

    return AsyncKernelManager(kernel_name="python3", kernel_spec_manager=_ThisPython(),
                              transport="ipc", connection_file=str(runtime_dir / "kernel.json"),
                              ip=str(runtime_dir / "kernel-ipc"))


def _write_notebook(nb: Any, path: Path) -> None:
    import nbformat

    try:
        nbformat.write(nb, path)
    except OSError as exc:
        raise NotebookError(f"cannot write {path}: {exc.strerror or exc}") from None


def count_images(nb: Any) -> int:
    """PNG outputs in an executed notebook."""
    return sum(1 for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
               if "image/png" in o.get("data", {}))


def execute_notebook(lake: Path | str, job: str, step: int | None, out_html: Path, *,
                     notebook: Path | None = None, with_code: bool = False,
                     executed_path: Path | None = None, timeout_s: float = 600.0,
                     progress: Callable[[str], None] | None = None) -> NotebookRun:
    """Run the post-mortem notebook for one stall and write it as self-contained HTML.

    The stall and the output paths are checked first (a wrong step fails fast with the job's
    stalls; a missing directory is not created). ``progress`` gets one line per code cell
    (default: stderr; control characters escaped). ``executed_path`` also keeps the executed
    ``.ipynb``. Raises :class:`NotebookError` when a cell fails, naming it, or when the kernel
    cannot run.
    """
    import nbformat
    import zmq
    from jinja2 import DictLoader
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    from nbconvert import HTMLExporter

    def say(line: str) -> None:
        line = escape_controls(line)
        if progress is None:
            print(line, file=sys.stderr, flush=True)
        else:
            progress(line)

    check_target(out_html, "--out")
    if executed_path is not None:
        check_target(executed_path, "--save-notebook")
    lake = Path(lake).resolve()
    case = open_stall(lake, job, step)  # fail fast, and resolve the worst stall
    step = case.step
    case.con.close()
    path = notebook or NOTEBOOK
    if not path.is_file():
        raise NotebookError(f"notebook {path} not found (run from a ckptwatch checkout, or "
                            "pass --notebook)")
    nb = inject_parameters(nbformat.read(path, as_version=4),
                           {"lake": str(lake), "job": job, "step": step})
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    started: dict[int, float] = {}
    current: list[int] = []

    def on_start(cell: Any, cell_index: int) -> None:
        started[cell_index] = time.monotonic()
        current[:] = [cell_index]

    def on_done(cell: Any, cell_index: int, **_: Any) -> None:
        n = code.index(cell_index) + 1 if cell_index in code else 0
        dt = time.monotonic() - started.get(cell_index, time.monotonic())
        say(f"  [{n}/{len(code)}] {_cell_title(cell)}  ({dt:.1f} s)")

    t0 = time.monotonic()
    say(f"postmortem {job} step {step}: starting a kernel and running {len(code)} cells of "
        f"{path.name}…")
    try:
        runtime = tempfile.TemporaryDirectory(prefix="ckptwatch-kernel-")
    except OSError as exc:
        raise NotebookError(f"cannot make a temporary directory for the notebook kernel: "
                            f"{exc.strerror or exc} (set TMPDIR to a writable directory)") from None
    try:
        with runtime:
            client = NotebookClient(nb, km=_this_python_kernel(Path(runtime.name)),
                                    timeout=int(timeout_s),
                                    resources={"metadata": {"path": str(Path.cwd())}},
                                    on_cell_start=on_start, on_cell_executed=on_done)
            client.execute(cleanup_kc=True)  # shut the kernel down now (we made its manager)
    except CellExecutionError as exc:
        where = ""
        if current and current[0] in code:
            where = (f" in cell {code.index(current[0]) + 1}/{len(code)} "
                     f"({_cell_title(nb.cells[current[0]])})")
        if executed_path is not None:
            _write_notebook(nb, executed_path)
        see = (f"the traceback is in {executed_path}" if executed_path is not None
               else "--save-notebook FILE.ipynb keeps the traceback")
        raise NotebookError(escape_controls(f"the notebook failed{where} for {job} step {step}: "
                                            f"{exc.ename}: {exc.evalue} ({see})")) from None
    except (OSError, RuntimeError, zmq.ZMQError) as exc:  # no kernel (dead, cannot start, no
        # socket), a cell over its timeout
        raise NotebookError(escape_controls(
            f"the notebook kernel failed for {job} step {step}: {type(exc).__name__}: "
            f"{exc}")) from None
    if executed_path is not None:
        _write_notebook(nb, executed_path)
    exporter = HTMLExporter(extra_loaders=[DictLoader({"ckptwatch.html.j2": _TEMPLATE})],
                            template_file="ckptwatch.html.j2", exclude_input=not with_code,
                            exclude_input_prompt=True, exclude_output_prompt=True)
    html, _ = exporter.from_notebook_node(
        nb, resources={"metadata": {"name": f"Stall post-mortem: {job} step {step}"}})
    try:
        out_html.write_text(html, encoding="utf-8")
    except OSError as exc:
        raise NotebookError(f"cannot write {out_html}: {exc.strerror or exc}") from None
    return NotebookRun(out_html, nb, count_images(nb), time.monotonic() - t0)
