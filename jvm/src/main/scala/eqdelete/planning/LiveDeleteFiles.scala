package eqdelete.planning

import scala.jdk.CollectionConverters._
import scala.util.Using

import org.apache.iceberg.{DeleteFile, FileContent, ManifestFiles, Table}

/** A snapshot's live delete files, from its delete manifests (metadata only). */
object LiveDeleteFiles {
  /** Every live equality delete file of `snapshotId`, with its sequence numbers; none for an unknown snapshot. */
  def equalityDeletes(table: Table, snapshotId: Long): Seq[DeleteFile] = {
    val snapshot = table.snapshot(snapshotId)
    if (snapshot == null) return Nil
    snapshot.deleteManifests(table.io()).asScala.toVector.flatMap { manifest =>
      Using.resource(ManifestFiles.readDeleteManifest(manifest, table.io(), table.specs())) { reader =>
        reader.asScala.filter(_.content() == FileContent.EQUALITY_DELETES).map(_.copy(): DeleteFile).toVector
      }
    }
  }
}
