"""The peer benchmark's parts that need no Trino and no Spark: what `bench --peer trino` runs on,
how it reads the numbers, and how Trino is configured. The benchmark itself runs Trino for real
(`python -m eqdelete bench --peer trino --quick`), outside the test command."""

from __future__ import annotations

import math

import pytest

from eqdelete.tools import cli, peer
from eqdelete.tools.cdc import REGIONS


def test_bench_takes_peer_trino_and_nothing_else() -> None:
    args = cli.build_parser().parse_args(["bench", "--peer", "trino", "--quick", "--only", "large_set", "--runs", "3"])
    assert (args.peer, args.quick, args.only, args.runs, args.run) == ("trino", True, "large_set", 3, cli._cmd_bench)
    assert cli.build_parser().parse_args(["bench"]).peer is None
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["bench", "--peer", "presto"])


def test_scenarios_are_the_issue_s_three_tables_in_their_own_namespace() -> None:
    cdc, streaming, large = peer.scenarios()
    assert [s.name for s in (cdc, streaming, large)] == ["cdc_upsert", "streaming_partitioned", "large_set"]
    assert all(s.table == f"local.peer.{s.name}" for s in (cdc, streaming, large))
    assert (cdc.spec.rows, cdc.spec.commits) == (10_000_000, 20)
    # 16 delete files a commit in all: files_per_commit is per partition.
    assert (streaming.spec.rows, streaming.spec.commits, streaming.spec.partitioning) == (4_000_000, 120, "identity")
    assert streaming.spec.files_per_commit * REGIONS == 16
    assert large.spec.rows == 5_000_000
    assert math.isclose(large.spec.rows * large.spec.delete_fraction * large.spec.commits, 2_000_000)
    for quick in peer.scenarios(quick=True):
        assert quick.spec.rows == 20_000 and quick.spec.commits <= 3
        quick.spec.validate()
    assert peer.scenarios(scale=0.1)[0].spec.rows == 1_000_000


def test_queries_name_every_key_column() -> None:
    single = peer.queries(["k1"])
    assert single["distinct_keys"] == "SELECT count(DISTINCT k1) AS keys FROM {t}"
    assert single["self_join"] == "SELECT count(*) AS n FROM {t} a JOIN {t} b ON a.k1 = b.k1"
    assert single["region_3"].endswith("FROM {t} WHERE region = 3")
    double = peer.queries(["k1", "k2"])
    assert "SELECT DISTINCT k1, k2 FROM {t}" in double["distinct_keys"]
    assert double["self_join"].endswith("ON a.k1 = b.k1 AND a.k2 = b.k2")


def test_each_engine_is_read_over_its_own_floor() -> None:
    seconds = {"trino": 6.0, "trino_floor": 2.0, "native": 8.0, "filter": 3.0, "join": 4.0, "auto": 3.0, "floor": 2.0}
    result = peer.PeerResult("s", "d", "aggregate", "SELECT 1", 3, 30, seconds, [[1]], "filter")
    assert result.ratios == {"trino_x_floor": 3.0, "native_x_floor": 4.0, "auto_x_floor": 1.5, "auto_x_trino": 0.5}
    table = peer.markdown([result])
    assert "| s | aggregate | 3 | 30 | 6.00 | 2.00 | **3.00** | 8.00 | 3.00 | 4.00 | 3.00 (filter) | 2.00 | 4.00 | **1.50** | 0.50 |" in table


def test_rows_that_differ_fail_with_both_rows() -> None:
    same = {"native": [[3, 7]], "auto": [[3, 7]], "trino": [[3, 7]]}
    assert peer.check_rows("q", same) == [[3, 7]]
    with pytest.raises(peer.RowsDifferError) as raised:
        peer.check_rows("large_set aggregate", {**same, "trino": [[4, 7]]})
    message = str(raised.value)
    assert "large_set aggregate" in message and "[[3, 7]]" in message and "trino: [[4, 7]]" in message
    assert "auto" not in message
    # Spark's Rows and Trino's JSON lists compare as plain sorted lists.
    assert peer._rows([(2, "b"), (1, "a")]) == peer._rows([[1, "a"], [2, "b"]])


def test_trino_listens_on_loopback_only(tmp_path) -> None:
    trino = peer.Trino(tmp_path / "trino", tmp_path / "java")
    trino.port = 8123
    etc = trino.write_config()

    def read(name: str) -> dict[str, str]:
        return dict(line.split("=", 1) for line in (etc / name).read_text().splitlines())

    node, config, catalog = read("node.properties"), read("config.properties"), read("catalog/iceberg.properties")
    assert node["node.bind-ip"] == "127.0.0.1"
    assert config["http-server.http.port"] == "8123" and config["discovery.uri"] == "http://127.0.0.1:8123"
    assert catalog["iceberg.catalog.type"] == "TESTING_FILE_METASTORE"
    assert catalog["hive.metastore.catalog.dir"] == (tmp_path / "trino" / "metastore").as_uri()
    # Run as Trino's launcher runs it: node.properties as system properties, the Vector API on.
    command = trino.command(etc)
    assert "-Dnode.bind-ip=127.0.0.1" in command and "--add-modules=jdk.incubator.vector" in command
    assert command[-2:] == [peer.MAIN_CLASS, peer.TRINO_VERSION]


def test_a_java_for_trino_is_25_or_later_with_the_vector_api(tmp_path) -> None:
    """Trino 483 needs Java 25 with the Vector API: the Java Spark runs on is taken only if it is one."""
    import shutil
    from pathlib import Path

    java = shutil.which("java")
    assert java is not None
    home = Path(java).resolve().parent.parent
    version = peer.java_version(home)
    assert version is not None and version >= 17
    if version < 25:
        assert peer.java_for_trino(home) is None
    assert peer.java_for_trino(tmp_path) is None and peer.java_version(tmp_path) is None  # no java there


def test_keyed_scenarios_are_the_scale_benchmark_s_delete_axis() -> None:
    """`--peer trino --keys uuid`: the scale benchmark's tables of 10^7 data rows at 10^6 and 10^7
    delete rows, keyed so; their floor the generator's rows, Spark's native read time-boxed."""
    low, high = peer.keyed_scenarios("uuid")
    assert (low.name, high.name) == ("uuid_1000000", "uuid_10000000")
    assert (low.point.axis, low.point.data_rows, low.point.delete_rows) == ("delete_rows", 10_000_000, 1_000_000)
    assert low.table == "local.scale.delete_rows_10000000_1000000_uuid" and low.key_columns == ["k1"]
    assert peer.keyed_scenarios("composite", delete_rows=(10**6,))[0].key_columns == ["k1", "k2", "k3"]
    (quick,) = peer.keyed_scenarios("uuid_type", quick=True)
    assert (quick.point.data_rows, quick.point.delete_rows, quick.point.keys) == (20_000, 2_000, "uuid_type")
    with pytest.raises(ValueError):
        peer.keyed_scenarios("float")
    args = cli.build_parser().parse_args(["bench", "--peer", "trino", "--keys", "uuid", "--at", "1e7"])
    assert (args.keys, args.at) == ("uuid", {10_000_000})


def test_a_wrong_or_time_boxed_read_is_shown_as_such() -> None:
    seconds = {"trino": 6.0, "trino_floor": 2.0, "native": math.inf, "filter": 3.0, "join": 4.0, "auto": 3.0, "floor": 2.0}
    result = peer.PeerResult("uuid_type_1000000", "d", "aggregate", "SELECT 1", 10, 10**6, seconds, [[1]], "filter",
                             wrong=["trino"], time_box=120.0)
    row = peer.markdown([result]).splitlines()[-1]
    assert "| 6.00 (wrong) | 2.00 | **3.00** | > 120 | 3.00 | 4.00 | 3.00 (filter) | 2.00 | - | **1.50** | 0.50 |" in row
    # The floor as the reference: a variant that differs from it is named.
    with pytest.raises(peer.RowsDifferError) as raised:
        peer.check_rows("q", {"floor": [[1]], "auto": [[2]]}, reference="floor")
    assert "from the floor [[1]]" in str(raised.value) and "auto: [[2]]" in str(raised.value)
