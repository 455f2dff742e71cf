"""Unfinished ranks in words: "3 of 512 ranks never finished step 5000; last seen on node017,
leaf03, target pool0-tgt07".

A rank is *unfinished* when it wrote a start marker and never its record (docs/concepts.md);
the ``stall_ranks`` mart lists them (``is_unfinished``) with the node, leaf switch(es) and
target where they were last seen. The daily report, the post-mortem and ``ckptwatch stalls``
say it with :func:`never_finished`, from the most common places first (:func:`where_seen`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence


def where_seen(names: Iterable[str | None], *, split_commas: bool = False) -> tuple[str, ...]:
    """Distinct names, most common first (ties by name); ``split_commas``: a value such as
    ``leaf03,leaf07`` (a node on several leaves) counts for each of them."""
    counts: Counter[str] = Counter()
    for name in names:
        if name is None or name == "":
            continue
        counts.update(name.split(",") if split_commas else [name])
    return tuple(n for n, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def name_list(names: Sequence[str], shown: int = 1) -> str:
    """The first ``shown`` names and how many more: ``node017 +2 more``."""
    head = ", ".join(names[:shown])
    rest = len(names) - shown
    return head + (f" +{rest} more" if rest > 0 else "")


def never_finished(*, step: int, n_unfinished: int, n_ranks: int,
                   nodes: Sequence[str] = (), leaves: Sequence[str] = (),
                   targets: Sequence[str] = (), timed_out: bool = False) -> str:
    """One sentence on a checkpoint's unfinished ranks (``n_ranks``: every rank known to the
    checkpoint, finished or not); empty when none is unfinished."""
    if n_unfinished <= 0:
        return ""
    noun = "rank" if n_ranks == 1 else "ranks"
    text = f"{n_unfinished} of {n_ranks} {noun} never finished step {step}"
    places = []
    if nodes:
        places.append(name_list(nodes))
    if leaves:
        places.append(name_list(leaves))
    if targets:
        places.append("target " + name_list(targets))
    if places:
        text += "; last seen on " + ", ".join(places)
    if timed_out:
        text += " (still open at the job's checkpoint timeout)"
    return text
