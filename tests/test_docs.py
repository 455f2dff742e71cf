"""The README's commands and flows exist, have help, and the two set-up commands are named; the
README and docs/scale.md stay short, the README's tree names what exists, links between the docs
hold, and the outputs the docs show are what the commands print on data/sample."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest
import yaml
from prefect import Flow
from prefect.flows import load_flow_from_entrypoint

from ckptwatch.cli.main import build_parser, main

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _commands() -> dict[str, object]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return dict(sub.choices)  # type: ignore[arg-type]


def test_readme_names_the_two_commands() -> None:
    assert "make demo" in README and "make test" in README
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^demo:", makefile, re.M) and re.search(r"^test:", makefile, re.M)
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_every_command_in_the_readme_exists_with_help() -> None:
    named = set(re.findall(r"`ckptwatch ([a-z][a-z-]+)", README))
    commands = _commands()
    assert named, "README names no command"
    missing = sorted(named - set(commands))
    assert not missing, f"README names commands that do not exist: {missing}"
    for name in named:
        assert commands[name].format_help()  # type: ignore[attr-defined]


def test_every_command_is_in_the_readme() -> None:
    named = set(re.findall(r"`ckptwatch ([a-z][a-z-]+)", README))
    assert set(_commands()) <= named


def test_flows_in_readme_and_prefect_yaml_exist() -> None:
    spec = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    for dep in spec["deployments"]:
        path, func = dep["entrypoint"].split(":")
        # Load the entry point as Prefect does (by file path): it names a flow object.
        flow_obj = load_flow_from_entrypoint(str(ROOT / path) + ":" + func)
        assert isinstance(flow_obj, Flow), dep["entrypoint"]
        assert f"`{dep['entrypoint']}`" in README
        for sched in dep.get("schedules", []):
            assert sched["timezone"] == "UTC"
            assert f"`{sched['cron']}`" in README


# -- the docs describe the present, briefly ---------------------------------------------------

def test_the_readme_and_the_scale_page_are_short() -> None:
    assert len(README.splitlines()) <= 350
    assert len((ROOT / "docs" / "scale.md").read_text().splitlines()) <= 250


def _tree_paths() -> list[str]:
    """The paths the README's tree names: a name at column 0 is under the root, one indented
    by two spaces is under the last such directory; deeper lines continue a description."""
    block = README.split("## What is in the tree", 1)[1].split("```")[1]
    paths, parent = [], ""
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        if not line.strip() or indent not in (0, 2):
            continue
        name = line.split()[0].rstrip(",")
        if indent == 0:
            parent = name if name.endswith("/") else ""
            paths.append(name)
        else:
            paths.append(parent + name)
    return paths


def test_the_tree_names_what_exists_and_every_part_of_the_package() -> None:
    paths = _tree_paths()
    assert not [p for p in paths if not (ROOT / p).exists()], "the tree names missing paths"
    package = ROOT / "src" / "ckptwatch"
    wanted = [f"src/ckptwatch/{d.name}/" for d in sorted(package.iterdir())
              if (d / "__init__.py").is_file()]
    wanted += [f"pipelines/{f.name}" for f in sorted((ROOT / "pipelines").glob("*.py"))
               if f.name != "__init__.py"]
    wanted += [f"sql/{d.name}/" for d in sorted((ROOT / "sql").iterdir()) if d.is_dir()]
    assert not [p for p in wanted if p not in paths], "the tree leaves these out"


#: The Markdown files whose links must hold.
DOC_FILES = [ROOT / "README.md", ROOT / "RELIABILITY.md", ROOT / "CHANGELOG.md",
             ROOT / "sql" / "README.md", ROOT / "deploy" / "README.md",
             ROOT / "data" / "sample" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, flags=re.M):
        slug = _anchor(heading)
        out.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return out


def _links(path: Path) -> list[str]:
    """The relative link targets of a Markdown file, outside code blocks and code spans."""
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    return [t for t in re.findall(r"\]\(([^)\s]+)\)", text)
            if not re.match(r"[a-z]+:", t)]


def test_links_between_the_docs_hold() -> None:
    broken = []
    for doc in DOC_FILES:
        for target in _links(doc):
            file_part, _, anchor = target.partition("#")
            dest = (doc.parent / file_part).resolve() if file_part else doc
            if not dest.exists():
                broken.append(f"{doc.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{doc.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken


# -- the outputs the docs show are what the commands print on the sample ----------------------

def _block_after(text: str, marker: str) -> str:
    """The fenced block that follows ``marker`` (the first after it)."""
    return text.split(marker, 1)[1].split("```", 2)[1].split("\n", 1)[1]


def _run(argv: list[str]) -> str:
    """A command's stdout, run in this process (rules only: no trained model)."""
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out):
        mp.setenv("CKPTWATCH_MODEL", "/nonexistent/attribution.joblib")
        mp.delenv("CKPTWATCH_CONFIG", raising=False)
        assert main(argv) == 0
    return out.getvalue()


@pytest.fixture(scope="module")
def stalls_printed(sample_lake: Path) -> str:
    """``ckptwatch stalls`` of the sample lake, the lake named as the docs name it."""
    return _run(["stalls", "--lake", str(sample_lake)]).replace(str(sample_lake), "data/lake")


def test_the_readme_shows_what_make_demo_prints_of_the_lake(sample_lake: Path,
                                                            stalls_printed: str) -> None:
    """The demo output's lake tables and stalls (what `make demo` prints after the nightly
    flow's summary and alerts) are those of the sample lake."""
    from ckptwatch.cli._render import lake_overview

    shown = _block_after(README, "What `make demo` prints")
    overview = lake_overview(sample_lake).replace(str(sample_lake), "data/lake")
    assert overview in shown
    stalls = stalls_printed.split("\nDetails: ", 1)[0]
    assert "stalls and their causes (top evidence line; `ckptwatch explain` for all of it)\n" \
        + stalls + "\n" in shown


def test_the_stalls_page_shows_what_stalls_and_explain_print(sample_lake: Path,
                                                             stalls_printed: str) -> None:
    page = (ROOT / "docs" / "stalls.md").read_text()
    command = "$ ckptwatch stalls --lake data/lake\n"
    assert command + stalls_printed in page
    match = re.search(r"^\$ ckptwatch explain --lake data/lake --job (\S+) --step (\d+)\n",
                      page, flags=re.M)
    assert match
    explained = _run(["explain", "--lake", str(sample_lake), "--job", match[1],
                      "--step", match[2]])
    assert match[0] + explained + "```" in page


def test_every_module_and_name_the_docs_cite_exists() -> None:
    """A dotted name of the package in the docs (``ckptwatch.lake.query.connect``) imports:
    a module moved or a function renamed shows up here, not in a reader's shell."""
    import importlib

    def resolves(name: str) -> bool:
        parts = name.split(".")
        for i in range(len(parts), 1, -1):
            try:
                obj: object = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
            for attr in parts[i:]:
                if not hasattr(obj, attr):
                    return False
                obj = getattr(obj, attr)
            return True
        return False

    cited = {name for doc in DOC_FILES if doc.name != "CHANGELOG.md"  # history keeps old names
             for name in re.findall(r"\bckptwatch(?:\.[A-Za-z_]\w*){2,}", doc.read_text())}
    assert len(cited) > 20
    assert not sorted(name for name in cited if not resolves(name))
