"""What the benchmarks and sweeps share: results saved after each item, merged across runs."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class ScatteredPoint:
    """What a benchmark point on one scattered table of ``data_rows`` rows is called: its key in
    the saved results, and its size for ``--at`` (a mixin of the points' frozen dataclasses)."""

    data_rows: int

    @property
    def key(self) -> str:
        return f"scattered/{self.data_rows}"

    @property
    def size(self) -> int:
        return self.data_rows


def saver(out: Path, stem: str, markdown: Callable[[list], str]) -> Callable[[list], None]:
    """Writes all results so far to ``out/<stem>.json`` (dataclasses as dicts) and ``<stem>.md``."""
    out.mkdir(parents=True, exist_ok=True)

    def save(results: list) -> None:
        (out / f"{stem}.json").write_text(json.dumps([asdict(r) for r in results], indent=2))
        (out / f"{stem}.md").write_text(markdown(results))

    return save


def run_each(
    items: Sequence[Item],
    run_one: Callable[[Item], Result],
    save: Callable[[list[Result]], None],
    report: Callable[[str], None],
    noun: str,
) -> list[Result]:
    """Run every item in order, reporting progress and saving all results so far after each,
    so an interrupted run keeps what it measured."""
    started = time.monotonic()
    results: list[Result] = []
    for i, item in enumerate(items, 1):
        report(f"{noun} {i}/{len(items)} ({time.monotonic() - started:.0f}s elapsed)")
        results.append(run_one(item))
        save(results)
    return results


def load_results(out: Path, stem: str, result_type: Callable[..., Result]) -> list[Result]:
    """The results ``saver`` wrote to ``out/<stem>.json``, if any."""
    path = out / f"{stem}.json"
    return [result_type(**r) for r in json.loads(path.read_text())] if path.is_file() else []


def run_merged(
    items: Sequence[Item],
    run_one: Callable[[Item], Result],
    keys: set[str],
    out: Path,
    stem: str,
    result_type: Callable[..., Result],
    markdown: Callable[[list], str],
    chart: Callable[[list, Path], None],
    report: Callable[[str], None],
) -> list[Result]:
    """``run_each`` into ``out/<stem>.{json,md,png}``, beside the results already there whose
    ``point`` is not among ``keys`` (other axes, masters or runs), so a report can be built up
    run by run. Returns this run's results."""
    earlier = [r for r in load_results(out, stem, result_type) if r.point not in keys]  # type: ignore[attr-defined]
    save_all = saver(out, stem, markdown)
    results = run_each(items, run_one, lambda done: save_all(earlier + done), report, "point")
    chart(earlier + results, out / f"{stem}.png")
    return results


def grouped_bars(ax: Any, groups: Sequence[str], series: Sequence[tuple[str, Sequence[float]]], fontsize: int = 8,
                 **tick_style: Any) -> None:
    """One bar per series in each group, side by side, with a line at 1.0 (the reference the
    values are ratios to); ``tick_style`` goes to the group labels (e.g. a rotation)."""
    width = 0.8 / len(series)
    for i, (label, values) in enumerate(series):
        ax.bar([j + i * width for j in range(len(groups))], values, width, label=label)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(groups))], groups, fontsize=fontsize, **tick_style)
    ax.legend(fontsize=8)
