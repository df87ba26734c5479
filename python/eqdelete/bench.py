"""The benchmark: scenarios x {native, filter, join, auto, floor, floor_keys}, medians and ratios.

The floor is the same logical table compacted (rewritten without delete files): what no
delete strategy can beat. ``floor_keys`` is the floor's query reading the key columns too,
which the query itself does not need and every delete strategy must read: the part of a
strategy's gap to the floor that no way of applying deletes removes. Every strategy's rows are
checked against the others; timings are reported, never asserted.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

from pyspark.sql import SparkSession

from eqdelete import _jvm
from eqdelete._report import run_each, saver, stderr_reporter
from eqdelete.cdc import CdcSpec, generate
from eqdelete.compare import Comparison, Variant, compare_rows, fingerprint, measure
from eqdelete.config import STRATEGIES
from eqdelete.toggles import use_strategy

QUERY = "SELECT count(*) AS n, sum(CAST(round(amount * 100) AS BIGINT)) AS cents, count(DISTINCT version) AS versions FROM {t}"

# The columns of the result tables: each strategy, then the two references.
REFERENCES = ("floor", "floor_keys")
COLUMNS = (*STRATEGIES, *REFERENCES)


def reading_keys(sql: str, key_columns: list[str]) -> str:
    """``sql`` (a QUERY) also reading ``key_columns``, and doing nothing else with them."""
    counts = ", ".join(f"count({c}) AS {c}_read" for c in key_columns)
    return sql.replace(" FROM ", f", {counts} FROM ", 1)


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    spec: CdcSpec


def _spec(name: str, **kwargs) -> CdcSpec:
    return CdcSpec(table=f"local.bench.{name}", **kwargs)


def default_scenarios(scale: float = 1.0) -> list[Scenario]:
    """Sized for 2 cores and 24 GB; ``scale`` multiplies the row counts."""
    n = lambda rows: max(1_000, int(rows * scale))  # noqa: E731
    return [
        Scenario("cdc_upsert", "Flink-style upserts: 10M keys, 20 commits upserting 1% of keys in all",
                 _spec("cdc_upsert", rows=n(10_000_000), data_files=16, commits=20, delete_fraction=0.0001,
                       upsert_fraction=0.0005)),
        Scenario("few_small", "1 delete file, 1,000 delete rows on 2M keys",
                 _spec("few_small", rows=n(2_000_000), data_files=8, commits=1, delete_fraction=0.0005, upsert_fraction=0.0)),
        Scenario("many_files", "200 delete files (10 per commit), 2M keys",
                 _spec("many_files", rows=n(2_000_000), data_files=8, commits=20, delete_fraction=0.0005,
                       upsert_fraction=0.0005, files_per_commit=10)),
        Scenario("large_set", "2M delete rows (larger than Iceberg's executor delete cache), 5M keys",
                 _spec("large_set", rows=n(5_000_000), data_files=8, commits=4, delete_fraction=0.1, upsert_fraction=0.0)),
        Scenario("multi_key", "3-column key (long, string, date), 2M keys, 10 upsert commits",
                 _spec("multi_key", rows=n(2_000_000), data_files=8, commits=10, delete_fraction=0.001,
                       upsert_fraction=0.005, key_types=("long", "string", "date"))),
        Scenario("partitioned", "identity-partitioned (8 partitions), partition-scoped deletes, 2M keys",
                 _spec("partitioned", rows=n(2_000_000), data_files=4, commits=10, delete_fraction=0.001,
                       upsert_fraction=0.005, partitioning="identity")),
    ]


def streaming_upsert(scale: float = 1.0, commits: int = 120) -> Scenario:
    """Many small commits, as a streaming upsert sink makes them: the planning benchmark's table."""
    rows = max(1_000, int(4_000_000 * scale))
    return Scenario("streaming_upsert", f"streaming upserts: {rows:,} keys, {commits} commits of 16 delete files each",
                    _spec("streaming_upsert", rows=rows, data_files=8, commits=commits,
                          files_per_commit=16, delete_fraction=0.0002, upsert_fraction=0.001))


def quick_scenarios() -> list[Scenario]:
    """Tiny versions of every scenario: for CI, which checks rows and never timings."""
    return [replace(s, spec=replace(s.spec, rows=20_000, data_files=2, commits=min(s.spec.commits, 3),
                                    files_per_commit=min(s.spec.files_per_commit, 2)))
            for s in default_scenarios()]


@dataclass
class ScenarioResult:
    name: str
    description: str
    delete_files: int
    delete_rows: int
    medians: dict[str, float]
    peak_heap_mb: dict[str, float]
    plans: dict[str, str]
    identical: bool
    ratio_to_native: dict[str, float] = field(default_factory=dict)
    ratio_to_floor: dict[str, float] = field(default_factory=dict)
    ratio_to_floor_keys: dict[str, float] = field(default_factory=dict)


def make_floor(spark: SparkSession, table: str) -> str:
    """The same rows compacted into a table without delete files."""
    floor = f"{table}_floor"
    spark.sql(f"DROP TABLE IF EXISTS {floor} PURGE")
    with use_strategy(spark, "native"):
        spark.sql(f"CREATE TABLE {floor} USING iceberg AS SELECT * FROM {table}")
    return floor


def run_scenario(spark: SparkSession, scenario: Scenario, runs: int, warmup: int,
                 progress: Callable[[str], None]) -> ScenarioResult:
    progress(f"{scenario.name}: generating ({scenario.description})")
    generate(spark, scenario.spec, replace=True, progress=lambda m: progress(f"{scenario.name}: {m}"))
    floor = make_floor(spark, scenario.spec.table)
    # Every strategy and both references, interleaved in one measurement: none gets the warm JVM alone.
    sql, floor_sql = QUERY.format(t=scenario.spec.table), QUERY.format(t=floor)
    variants = [Variant(s, s, sql) for s in STRATEGIES] + [
        Variant("floor", "native", floor_sql),
        Variant("floor_keys", "native", reading_keys(floor_sql, scenario.spec.key_columns))]
    timings = measure(spark, variants, runs=runs, warmup=warmup, progress=lambda m: progress(f"{scenario.name}: {m}"))
    comparison: Comparison = compare_rows(spark, sql, STRATEGIES, timings)
    floor_rows = fingerprint(spark.sql(floor_sql))
    identical = comparison.identical and floor_rows == (comparison.runs[0].rows, comparison.runs[0].fingerprint)

    medians = {name: statistics.median(t.seconds) for name, t in timings.items()}
    native, floor_median, floor_keys = medians["native"], medians["floor"], medians["floor_keys"]
    result = ScenarioResult(
        name=scenario.name,
        description=scenario.description,
        delete_files=comparison.by_strategy("join").delete_files,
        delete_rows=comparison.by_strategy("join").delete_rows,
        medians=medians,
        peak_heap_mb={name: t.peak_heap_bytes / 2**20 for name, t in timings.items()},
        plans={r.strategy: r.plan for r in comparison.runs},
        identical=identical,
        ratio_to_native={k: v / native for k, v in medians.items()},
        ratio_to_floor={k: v / floor_median for k, v in medians.items()},
        ratio_to_floor_keys={k: v / floor_keys for k, v in medians.items()},
    )
    progress(f"{scenario.name}: " + ", ".join(f"{k} {v:.2f}s" for k, v in medians.items()))
    return result


def markdown(results: list[ScenarioResult]) -> str:
    lines = [
        "| scenario | delete files | delete rows | "
        + " | ".join(f"{c} s (x native, x floor, x floor_keys)" for c in COLUMNS) + " | auto plan | peak heap MB native / auto |",
        "| --- | ---: | ---: | " + " | ".join("---:" for _ in COLUMNS) + " | --- | ---: |",
    ]
    for r in results:
        cells = [f"{r.medians[c]:.2f} ({r.ratio_to_native[c]:.2f}, {r.ratio_to_floor[c]:.2f}, {r.ratio_to_floor_keys[c]:.2f})"
                 for c in COLUMNS]
        lines.append(
            f"| {r.name} | {r.delete_files:,} | {r.delete_rows:,} | " + " | ".join(cells)
            + f" | {r.plans.get('auto', '-')} | {r.peak_heap_mb['native']:,.0f} / {r.peak_heap_mb['auto']:,.0f} |"
        )
    return "\n".join(lines) + "\n"


def chart(results: list[ScenarioResult], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(results)), 4))
    width = 0.8 / len(COLUMNS)
    for i, column in enumerate(COLUMNS):
        xs = [j + i * width for j in range(len(results))]
        ax.bar(xs, [r.ratio_to_native[column] for r in results], width, label=column)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(results))], [r.name for r in results], fontsize=8)
    ax.set_ylabel("median time / native (lower is faster)")
    ax.legend(fontsize=8)
    ax.set_title("eqdelete benchmark", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(spark: SparkSession, scenarios: list[Scenario], out: Path, runs: int, warmup: int,
        progress: Callable[[str], None] | None = None) -> list[ScenarioResult]:
    report = progress or stderr_reporter("eqdelete bench")
    spark.sql("CREATE NAMESPACE IF NOT EXISTS local.bench")
    save = saver(out, "results", markdown)

    results = run_each(scenarios, lambda s: run_scenario(spark, s, runs, warmup, report), save, report, "scenario")
    chart(results, out / "results.png")
    return results


@dataclass
class PlanningResult:
    """Seconds to plan one query (its scans' files included), cold and warm, per strategy."""

    scenario: str
    description: str
    query: str
    cold: dict[str, float]
    warm: dict[str, float]

    def markdown(self) -> str:
        lines = [f"Planning `{self.query}` on {self.scenario} ({self.description}); medians, x native:", "",
                 "| strategy | cold s | cold x native | warm s | warm x native |", "|---|---|---|---|---|"]
        for s in self.cold:
            lines.append(f"| {s} | {self.cold[s]:.3f} | {self.cold[s] / self.cold['native']:.2f} | "
                         f"{self.warm[s]:.3f} | {self.warm[s] / self.warm['native']:.2f} |")
        return "\n".join(lines) + "\n"


def planning(spark: SparkSession, scenario: Scenario, runs: int, out: Path,
             progress: Callable[[str], None] | None = None) -> PlanningResult:
    """How long a query takes to plan under each strategy, cold (eqdelete's delete plans
    forgotten first) and warm (planned again right after), interleaved, one warm-up round."""
    report = progress or stderr_reporter("eqdelete bench --planning")
    out.mkdir(parents=True, exist_ok=True)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS local.bench")
    report(f"{scenario.name}: generating ({scenario.description})")
    generate(spark, scenario.spec, replace=True, progress=lambda m: report(f"{scenario.name}: {m}"))
    sql = QUERY.format(t=scenario.spec.table)
    cold: dict[str, list[float]] = {s: [] for s in STRATEGIES}
    warm: dict[str, list[float]] = {s: [] for s in STRATEGIES}
    for round_ in range(runs + 1):
        for strategy in STRATEGIES:
            with use_strategy(spark, strategy):
                _jvm.forget_delete_plans(spark)
                first = _jvm.seconds_to_plan(spark.sql(sql))
                again = _jvm.seconds_to_plan(spark.sql(sql))
            if round_ > 0:  # the first round warms the JVM up
                cold[strategy].append(first)
                warm[strategy].append(again)
        report(f"{scenario.name}: planning round {round_}/{runs} done")
    result = PlanningResult(scenario.name, scenario.description, sql,
                            {s: statistics.median(v) for s, v in cold.items()},
                            {s: statistics.median(v) for s, v in warm.items()})
    (out / "planning.json").write_text(json.dumps(asdict(result), indent=2))
    (out / "planning.md").write_text(result.markdown())
    return result
