package eqdelete.planning

import scala.jdk.CollectionConverters._

import org.apache.iceberg.{DeleteFile, FileContent, Table}
import org.apache.spark.sql.eqdelete.compat.IcebergInternals

/** A snapshot's live delete files, from its delete manifests (metadata only). */
object LiveDeleteFiles {
  /** Every live equality delete file of `snapshotId`, with its sequence numbers; none for an unknown snapshot. */
  def equalityDeletes(table: Table, snapshotId: Long): Seq[DeleteFile] = of(table, snapshotId, FileContent.EQUALITY_DELETES)

  /** Whether snapshot `snapshotId` may hold equality deletes: its summary's count says so, or is missing. */
  def mayHoldEqualityDeletes(table: Table, snapshotId: Long): Boolean =
    Option(table.snapshot(snapshotId)).flatMap(s => Option(s.summary())).flatMap(s => Option(s.get("total-equality-deletes")))
      .forall(count => scala.util.Try(count.toLong).getOrElse(1L) > 0)

  /** Every live position delete file (deletion vectors included) of `snapshotId`; none for an unknown snapshot. */
  def positionDeletes(table: Table, snapshotId: Long): Seq[DeleteFile] = of(table, snapshotId, FileContent.POSITION_DELETES)

  private def of(table: Table, snapshotId: Long, content: FileContent): Seq[DeleteFile] = {
    val snapshot = table.snapshot(snapshotId)
    if (snapshot == null) return Nil
    snapshot.deleteManifests(table.io()).asScala.toVector.flatMap { manifest =>
      IcebergInternals.liveDeleteFiles(manifest, table, content)
    }
  }
}
