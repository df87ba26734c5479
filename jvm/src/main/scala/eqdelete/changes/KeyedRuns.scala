package eqdelete.changes

import org.apache.iceberg.{Schema, Table}
import org.apache.spark.sql.{functions => F, DataFrame}
import org.apache.spark.sql.expressions.Window

/**
 * The deleted rows of a run of snapshots whose deletes are exactly their delete keys' rows
 * ([[SnapshotDeleteKeys.exact]]), from one read, not one per snapshot: what a stream's
 * micro-batch of many small upsert commits costs, or a range of them.
 *
 * In such a run every snapshot's parent is the one before it, and each snapshot removes rows of
 * older files only by its equality deletes on the run's key columns (global, or partitioned by them), whose equality Spark
 * computes exactly (no position delete of it names an older file; none removes a file). So a row
 * live before a snapshot of the run is either a row live before the run (in the files the run's
 * snapshots touch) or one a snapshot before it inserted, and it goes at the first later snapshot
 * of the run that deletes its key. The rows are read once (the run's first parent's rows of its
 * touched files and the run's inserts, each kept to the rows of some delete key of the run), and
 * ordered by key with the run's delete keys, each tagged with its snapshot's ordinal: a row's
 * first delete after it came is its DELETE. That is a sort of the changes, not of the table.
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
  def deleted(table: Table, target: Schema, run: Seq[Keyed], read: (Long, Set[String], Schema, Boolean) => DataFrame): DataFrame = {
    val ids = run.head._2.equalityIds
    val keys = run.map(_._2.deleteKeys).reduce(_ union _)
    val parentId = run.head._1.snapshot.parentId().longValue
    // NULL-safe also where a read names a key otherwise than the table does now (SnapshotDeleteKeys.matches).
    val schemas = ChangesPlan.schemaOf(table, table.snapshot(parentId)) +: run.map(r => ChangesPlan.schemaOf(table, r._1.snapshot))
    val nullSafe = run.exists(_._2.nullSafe) ||
      schemas.exists(s => ids.map(SnapshotDeleteKeys.path(s, _)) != ids.map(SnapshotDeleteKeys.path(table.schema(), _)))
    def narrowed(rows: DataFrame, origin: Int) =
      rows.join(keys, SnapshotDeleteKeys.matches(rows, target, ids, target, keys, nullSafe), "left_semi")
        .withColumn(At, F.lit(origin)).withColumn(IsDelete, F.lit(false))
    // The parent's files the run touches: a snapshot's touched files less those its run inserted before it.
    val insertedBefore = run.scanLeft(Set.empty[String])(_ ++ _._1.added)
    val parentFiles = run.zip(insertedBefore).flatMap { case ((w, _), before) => w.touched -- before }.toSet
    // When the first snapshot touches every file of its parent, the run's read of them is the parent whole.
    val before = narrowed(read(parentId, parentFiles, schemas.head, run.head._1.readsWholeParent), Int.MinValue)
    // The last snapshot's inserts outlive the run.
    val inserted = run.init.filter(_._1.added.nonEmpty).map { case (w, _) =>
      narrowed(read(w.snapshot.snapshotId(), w.added, ChangesPlan.schemaOf(table, w.snapshot), false), w.ordinal)
    }
    // Each delete key as an event of its snapshot, in the rows' columns (the others NULL).
    val targetType = org.apache.spark.sql.eqdelete.compat.IcebergSparkTables.sparkSchema(target)
    val keyNames = ids.map(id => target.findField(id).name())
    val deletes = run.map { case (w, k) =>
      k.deleteKeys.select(targetType.fields.toSeq.map { f =>
        val i = keyNames.indexOf(f.name)
        // A key column promoted since (int to long) widens; nothing narrows.
        (if (i < 0) F.lit(null).cast(f.dataType)
        else ByFieldId.widened(F.col(s"_eqdelete_key_$i"), k.deleteKeys.schema(s"_eqdelete_key_$i").dataType, f.dataType,
          s"key column ${f.name} of snapshot ${w.snapshot.snapshotId()}")).as(f.name)
      } ++ Seq(F.lit(null).cast("string").as("_file"), F.lit(null).cast("long").as("_pos"), F.lit(w.ordinal).as(At),
        F.lit(true).as(IsDelete)): _*)
    }
    // By key (NULL equal to NULL, as the deletes match), in order; a delete sorts before a row of
    // the same snapshot, whose own deletes never remove its inserts. A row's DELETE is the first
    // delete after it: linear in the events, however often a key is upserted.
    val events = (before +: inserted).reduce(_ unionByName _).unionByName(deletes.reduce(_ unionByName _))
    val afterIt = Window.partitionBy(keyNames.map(n => F.col(ChangesPlan.quote(n))): _*)
      .orderBy(F.col(At), F.col(IsDelete).desc).rowsBetween(Window.currentRow, Window.unboundedFollowing)
    val columns = targetType.fieldNames.toSeq.map(c => F.col(ChangesPlan.quote(c)))
    events.withColumn(ChangesPlan.ChangeOrdinal, F.min(F.when(F.col(IsDelete), F.col(At))).over(afterIt))
      .where(!F.col(IsDelete) && F.col(ChangesPlan.ChangeOrdinal).isNotNull)
      .select(columns ++ Seq(F.col(ChangesPlan.ChangeOrdinal),
        ChangesPlan.commitSnapshotIdAt(run.map(_._1), F.col(ChangesPlan.ChangeOrdinal)).as(ChangesPlan.CommitSnapshotId)): _*)
  }

  /** Where an event sits in the run (a row: the snapshot that inserted it, or before the run; a delete: its snapshot). */
  private val At = "_eqdelete_at"
  private val IsDelete = "_eqdelete_is_delete"
}
