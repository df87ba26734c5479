"""What an index of a table's live rows by key would cost per key, measured before it is built.

A round of ``maintain`` on a table whose keys are scattered reads the key column of every data
file (PERFORMANCE.md, "Resolving again"). An index of the live rows' keys (key to data file and
position), held by the executors across rounds, would make a round cost its new deletes and new
rows instead. Its storage is ``eqdelete.liveindex.LiveKeyStore``: one RocksDB per index
partition, on the executors' local disks. This probe loads stores of 10^6 to 10^8 (or more)
entries, long keys in random order, one store per core, and measures per entry: the load (what a
rebuild costs beyond reading the keys), the bytes on disk, a lookup (what a round's new delete
row costs), and an update (a row added and one removed: a round's new rows and resolved ones);
then the other way to load, the entries partitioned and sorted by Spark and each store given
one sorted file.
Times are reported, never asserted.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from pyspark.sql import SparkSession

from eqdelete import _jvm

SIZES = (10**6, 10**7, 10**8)
LOOKUPS = 10_000
UPDATES = 100_000
DATA_FILES = 1_000


@dataclass(frozen=True)
class ProbePoint:
    """One size: every store's measurements summed (entries, bytes) or per entry (times)."""

    rows: int
    stores: int
    load_s: float                 # wall time of the slowest store's load
    load_us_per_entry: float      # per entry, per store (each store on its own core)
    compact_s: float
    bytes_per_entry: float        # on disk, compacted, LZ4
    lookup_us: float              # one key looked up, its entries read, through an iterator of its own
    found_per_lookup: float
    update_us: float              # one entry added and one removed
    sorted_load_s: float          # the other load: Spark partitions and sorts, each store ingests one sorted file
    sorted_bytes_per_entry: float
    sorted_lookup_us: float = math.nan  # keys sorted first, one iterator for all (as the index looks up)

    def row(self) -> str:
        def f(x: float, digits: int = 1) -> str:
            return "" if math.isnan(x) else f"{x:.{digits}f}"
        return (f"| {self.rows:,} | {self.stores} | {f(self.load_s)} | {f(self.load_us_per_entry, 2)} | "
                f"{f(self.compact_s)} | {f(self.bytes_per_entry)} | {f(self.lookup_us)} | {f(self.sorted_lookup_us)} | {f(self.update_us, 2)} | "
                f"{f(self.sorted_load_s)} | {f(self.sorted_bytes_per_entry)} |")


def run(spark: SparkSession, sizes: tuple[int, ...], say: Callable[[str], None], *, puts: bool = True) -> list[ProbePoint]:
    """Each size loaded entry by entry (unless ``puts`` is False: the sorted load only, the slow
    way being minutes at 3x10^8) and by the sorted load."""
    stores = spark.sparkContext.defaultParallelism
    points = []
    for rows in sizes:
        say(f"{rows:,} entries over {stores} stores")
        measured = _jvm.live_key_store_probe(spark, rows, stores, DATA_FILES, LOOKUPS, UPDATES) if puts else []
        bulk = _jvm.live_key_store_bulk(spark, rows, stores, DATA_FILES)
        if bulk["entries"] != rows or bulk["found"] != bulk["asked"]:
            raise AssertionError(f"the sorted load of {rows:,} entries holds {bulk['entries']:,} and found "
                                 f"{bulk['found']:,} of its first {bulk['asked']:,} keys")
        nan = float("nan")
        point = ProbePoint(
            rows=rows, stores=stores,
            load_s=max((m["loadNanos"] for m in measured), default=nan) / 1e9,
            load_us_per_entry=statistics.mean(m["loadNanos"] / m["entries"] for m in measured) / 1e3 if puts else nan,
            compact_s=max((m["compactNanos"] for m in measured), default=nan) / 1e9,
            bytes_per_entry=sum(m["bytes"] for m in measured) / rows if puts else nan,
            lookup_us=statistics.mean(m["lookupNanos"] / m["lookups"] for m in measured) / 1e3 if puts else nan,
            found_per_lookup=sum(m["found"] for m in measured) / sum(m["lookups"] for m in measured) if puts else 1.0,
            update_us=statistics.mean(m["updateNanos"] / m["updates"] for m in measured) / 1e3 if puts else nan,
            sorted_load_s=bulk["nanos"] / 1e9,
            sorted_bytes_per_entry=bulk["bytes"] / rows,
            sorted_lookup_us=statistics.mean(m["sortedLookupNanos"] / m["lookups"] for m in measured) / 1e3 if puts else nan)
        if point.found_per_lookup != 1.0 or any(m["sortedFound"] != m["lookups"] for m in measured):
            raise AssertionError(f"a lookup of a key stored once found {point.found_per_lookup} entries on average")
        say(point.row())
        points.append(point)
    return points


def markdown(points: list[ProbePoint]) -> str:
    return "\n".join([
        "| entries | stores | load s | load us/entry | compact s | bytes/entry | lookup us | lookup us, sorted, one iterator "
        "| update us | sorted load s | bytes/entry, sorted load |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        *(p.row() for p in points), ""])


def save(points: list[ProbePoint], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "live-index-probe.json").write_text(json.dumps([asdict(p) for p in points], indent=2) + "\n")
    (out / "live-index-probe.md").write_text(markdown(points))
