package eqdelete.changes

import org.apache.iceberg.{Schema, Table}
import org.apache.spark.sql.{functions => F, DataFrame, SparkSession}

/**
 * The deleted rows of a run of snapshots whose deletes are exactly their delete keys' rows
 * ([[SnapshotDeleteKeys.exact]]), from one read, not one per snapshot: what a stream's
 * micro-batch of many small upsert commits costs, or a range of them.
 *
 * In such a run every snapshot's parent is the one before it, and each snapshot removes rows of
 * older files only by its global equality deletes on the run's key columns, whose equality Spark
 * computes exactly (no position delete of it names an older file; none removes a file). So a row
 * live before a snapshot of the run is either a row live before the run (in the files the run's
 * snapshots touch) or one a snapshot before it inserted, and it goes at the first later snapshot
 * of the run that deletes its key. The rows are read once (the run's first parent's rows of its
 * touched files and the run's inserts, each kept to the rows of some delete key of the run), and
 * each is joined with the run's delete keys, each tagged with its snapshot's ordinal: a row's
 * first delete after it came is its DELETE. That is a join of the changes, not of the table.
 */
private[changes] object KeyedRuns {

  /** A snapshot's work and its delete keys, exact. */
  type Keyed = (SnapshotWork, SnapshotDeleteKeys)

  /**
   * `keyed` (in the range's order) as runs: consecutive snapshots, each the child of the one
   * before, all read whole and on the same key columns, which the range's schema `target` has.
   */
  def of(keyed: Seq[Keyed], target: Schema): Seq[Seq[Keyed]] =
    keyed.foldLeft(Vector.empty[Vector[Keyed]]) { case (runs, next @ (w, k)) =>
      val continues = runs.lastOption.flatMap(_.lastOption).exists { case (last, lastKeys) =>
        w.whole && last.whole && Option(w.snapshot.parentId()).exists(_.longValue == last.snapshot.snapshotId()) &&
          k.equalityIds == lastKeys.equalityIds && k.equalityIds.forall(id => target.findField(id) != null)
      }
      if (continues) runs.init :+ (runs.last :+ next) else runs :+ Vector(next)
    }

  /**
   * The rows `run` deleted, in the columns of `target` with `_change_ordinal` and
   * `_commit_snapshot_id`. `read(snapshotId, files, schema, whole)` reads the live rows of `files`
   * at a snapshot (all of its files when `whole`), with `_file` and `_pos`, as the columns of `target`.
   */
  def deleted(session: SparkSession, table: Table, target: Schema, run: Seq[Keyed],
      read: (Long, Set[String], Schema, Boolean) => DataFrame): DataFrame = {
    val ids = run.head._2.equalityIds
    val keys = run.map(_._2.deleteKeys).reduce(_ union _)
    val parentId = run.head._1.snapshot.parentId().longValue
    // NULL-safe also where a read names a key otherwise than the table does now (SnapshotDeleteKeys.matches).
    val schemas = ChangesPlan.schemaOf(table, table.snapshot(parentId)) +: run.map(r => ChangesPlan.schemaOf(table, r._1.snapshot))
    val nullSafe = run.exists(_._2.nullSafe) ||
      schemas.exists(s => ids.map(SnapshotDeleteKeys.path(s, _)) != ids.map(SnapshotDeleteKeys.path(table.schema(), _)))
    def matching(rows: DataFrame, keys: DataFrame) = SnapshotDeleteKeys.matches(rows, target, ids, target, keys, nullSafe)
    def narrowed(rows: DataFrame, origin: Int) = rows.join(keys, matching(rows, keys), "left_semi").withColumn("_origin", F.lit(origin))
    // The parent's files the run touches: a snapshot's touched files less those its run inserted before it.
    val insertedBefore = run.scanLeft(Set.empty[String])(_ ++ _._1.added)
    val parentFiles = run.zip(insertedBefore).flatMap { case ((w, _), before) => w.touched -- before }.toSet
    // The first snapshot touches every file of its parent: then the run does too.
    val before = narrowed(read(parentId, parentFiles, schemas.head, run.head._1.readsWholeParent), Int.MinValue)
    // The last snapshot's inserts outlive the run.
    val inserted = run.init.filter(_._1.added.nonEmpty).map { case (w, _) =>
      narrowed(read(w.snapshot.snapshotId(), w.added, ChangesPlan.schemaOf(table, w.snapshot), false), w.ordinal)
    }
    val rows = (before +: inserted).reduce(_ unionByName _)
    val deletes = run.map { case (w, k) =>
      k.deleteKeys.select(ids.indices.map(i => F.col(s"_eqdelete_key_$i")) :+ F.lit(w.ordinal).as("_deleted_by"): _*)
    }.reduce(_ union _)
    val columns = (0 until target.columns().size()).map(i => target.columns().get(i).name())
    val snapshotIds = F.map(run.flatMap { case (w, _) => Seq(F.lit(w.ordinal), F.lit(w.snapshot.snapshotId())) }: _*)
    rows.join(deletes, matching(rows, deletes) && deletes("_deleted_by") > rows("_origin"))
      .groupBy(rows("_file"), rows("_pos"))
      .agg(F.first(F.struct(columns.map(c => rows(ChangesPlan.quote(c))): _*)).as("_row"), F.min("_deleted_by").as(ChangesPlan.ChangeOrdinal))
      .select(columns.map(c => F.col("_row").getField(c).as(c)) ++ Seq(F.col(ChangesPlan.ChangeOrdinal),
        F.element_at(snapshotIds, F.col(ChangesPlan.ChangeOrdinal)).as(ChangesPlan.CommitSnapshotId)): _*)
  }
}
