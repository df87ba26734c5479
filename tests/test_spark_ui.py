"""What eqdelete did, where Spark users look: a job with Spark's UI on (loopback, a free port)
runs a filter query, a join query and a round of maintain, then reads back, over HTTP, the SQL
metrics of each query from Spark's REST API (/api/v1/.../sql) and maintain's figures from the
metrics system's Prometheus servlet (/metrics/prometheus): what a dashboard would scrape."""

from __future__ import annotations

import json
from pathlib import Path

from processes import python_job

from eqdelete.tools.lakehouse import free_port

JOB = """
import json, sys, time, urllib.request
import eqdelete
from fixtures import FIXTURES

port, warehouse = int(sys.argv[1]), sys.argv[2]
spark = eqdelete.session("eqdelete-ui", master="local[2]", warehouse=warehouse, conf={
    "spark.ui.enabled": "true", "spark.ui.port": str(port), "spark.port.maxRetries": "0",
    "spark.ui.showConsoleProgress": "false",
    "spark.metrics.conf.*.sink.prometheusServlet.class": "org.apache.spark.metrics.sink.PrometheusServlet",
    "spark.metrics.conf.*.sink.prometheusServlet.path": "/metrics/prometheus",
    "spark.eqdelete.maintain.liveIndex": "always",  # auto keeps none for a table this small
})
spark.sparkContext.setLogLevel("ERROR")
spark.sql("CREATE NAMESPACE IF NOT EXISTS local.ui")
table = "local.ui.single_key"
FIXTURES["single_key"](spark, table)
base = f"http://127.0.0.1:{port}"
app = spark.sparkContext.applicationId

def get(path):
    with urllib.request.urlopen(base + path, timeout=30) as answer:
        return answer.read().decode()

def last_query_metrics():
    # The status store takes the execution's end (and its metrics) a moment after the query returns,
    # longer on a busy machine: asked again until it has them.
    for _ in range(60):
        spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
        executions = json.loads(get(f"/api/v1/applications/{app}/sql?details=true&planDescription=false"))
        last = max(executions, key=lambda e: e["id"])
        if last["status"] != "RUNNING" and any(node["metrics"] for node in last["nodes"]):
            break
        time.sleep(0.5)
    return {node["nodeName"]: {m["name"]: m["value"] for m in node["metrics"]} for node in last["nodes"] if node["metrics"]}

out = {}
for strategy in ("filter", "join"):
    with eqdelete.use_strategy(spark, strategy):
        spark.sql(f"SELECT count(*) FROM {table}").collect()
        out[strategy] = last_query_metrics()
out["round"] = eqdelete.maintain_round(spark, table, keep_index=True).as_dict()
out["prometheus"] = [line for line in get("/metrics/prometheus").splitlines() if "eqdelete" in line]
print(json.dumps(out))
spark.stop()
"""


def _only(metrics: dict[str, dict[str, str]], node: str) -> dict[str, str]:
    [found] = [m for name, m in metrics.items() if name.startswith(node)]
    return found


def test_metrics_read_back_from_the_rest_api_and_the_prometheus_servlet(tmp_path: Path) -> None:
    done = python_job(JOB, tmp_path, str(free_port()), str(tmp_path / "wh"), timeout=600,
                      env={"SPARK_LOCAL_IP": "127.0.0.1"})  # Spark's UI binds to loopback only
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    # The single_key fixture: 4 delete rows on k in one file, 3 rows they remove.
    for strategy in ("filter", "join"):
        scan = _only(out[strategy], "BatchScan")
        assert scan["number of equality delete files"] == "1", scan      # Iceberg's own, kept
        assert int(scan["total planning duration (ms)"]) >= 0 and scan["number of result data files"] != "0"
    index = _only(out["filter"], "BuildDeleteKeyIndex")
    assert (index["delete rows of the index"], index["distinct keys in the index"], index["data rows removed by the index"],
            index["index kept from an earlier query (1) or built (0)"]) == ("4", "4", "3", "0"), index
    assert "B" in index["index size in memory"] and "time to build the index" in " ".join(index), index
    deletes = _only(out["join"], "EqualityDeleteRows")
    assert (deletes["delete rows read"], deletes["data rows removed by the join"]) == ("4", "3"), deletes

    assert out["round"]["rows_resolved"] == 3
    prometheus = {line.split("{")[0].split(" ")[0]: line.rsplit(" ", 1)[-1] for line in out["prometheus"]}
    def value(name: str) -> str:
        [found] = [v for k, v in prometheus.items() if k.endswith(name)]
        return found
    assert value("eqdelete_maintain_rounds_Count") == "1", prometheus
    assert value("eqdelete_maintain_roundsCommitted_Count") == "1"
    assert value("eqdelete_maintain_rowsResolved_Count") == "3"
    assert value("eqdelete_maintain_equalityDeleteFilesRemoved_Count") == "1"
    assert value("eqdelete_maintain_roundTime_Count") == "1"
    assert any("eqdelete_maintain_lagSeconds" in k for k in prometheus), prometheus
    # A round of a long-running maintain: its kept index of the live rows, as gauges of the table.
    entries = out["round"]["live_index_entries"]
    assert entries > 0 and out["round"]["live_index_bytes"] > 0, out["round"]
    gauges = {k: v for k, v in prometheus.items() if "eqdelete_maintain_liveIndexEntries" in k}
    assert gauges and all(float(v) == entries for v in gauges.values()), (entries, gauges)
    assert any("eqdelete_maintain_liveIndexBytes" in k for k in prometheus), prometheus
