"""The classic side of the Connect tier: what eqdelete's public functions return on a classic
session, on the warehouse a Connect server uses, as JSON on stdout. Run as its own process (a
Python process holds classic or Connect sessions, not both):

    python classic_twin.py WAREHOUSE CONNECT_TABLE CLASSIC_TABLE
"""

from __future__ import annotations

import dataclasses
import json
import sys

from pyspark.sql import functions as F

import eqdelete
from eqdelete.tools.cdc import generate

from connect_cases import QUERY, STRATEGIES, changes_fingerprint, fingerprint_sql, spec


def main(warehouse: str, connect_table: str, classic_table: str) -> None:
    spark = eqdelete.session("eqdelete-classic-twin", master="local[2]", warehouse=warehouse,
                             conf={"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", "spark.sql.shuffle.partitions": "4",
                                   "spark.sql.session.timeZone": "UTC", "spark.driver.memory": "2g"})
    spark.sparkContext.setLogLevel("ERROR")
    generate(spark, spec(classic_table), progress=None)
    out: dict = {"decisions": {}, "last_decisions": {}}
    for strategy in STRATEGIES:
        with eqdelete.use_strategy(spark, strategy):
            df = spark.sql(QUERY.format(t=connect_table))
            out["decisions"][strategy] = [dataclasses.asdict(d) for d in eqdelete.decisions(df)]
            df.agg(F.count("*")).collect()
            out["last_decisions"][strategy] = [dataclasses.asdict(d) for d in eqdelete.last_decisions(spark)]
    out["summary"] = dataclasses.asdict(eqdelete.summarize(spark, connect_table))
    out["classic_table"] = {
        "summary": dataclasses.asdict(eqdelete.summarize(spark, classic_table)),
        "fingerprint": [int(v) for v in spark.sql(fingerprint_sql(classic_table)).first()],
    }
    out["resolve_dry_run"] = dataclasses.asdict(eqdelete.resolve_equality_deletes(spark, connect_table, dry_run=True))
    out["status"] = [dataclasses.asdict(s) for s in eqdelete.status(spark, connect_table)]
    out["changes"] = changes_fingerprint(eqdelete.changes(spark, connect_table))
    spark.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main(*sys.argv[1:4])
