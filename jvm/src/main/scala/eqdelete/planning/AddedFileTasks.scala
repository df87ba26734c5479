package eqdelete.planning

import scala.jdk.CollectionConverters._

import org.apache.iceberg.{DataFile, DeleteFile, FileContent, FileScanTask, PartitionSpec, Table}
import org.apache.iceberg.expressions.{Evaluator, Expression, InclusiveMetricsEvaluator, Projections}
import org.apache.iceberg.types.{Comparators, Conversions, Types}
import org.apache.spark.sql.eqdelete.compat.IcebergInternals

/**
 * The scan tasks of data files a snapshot added, read at that snapshot, from the snapshot's own
 * manifests rather than a plan of every file it holds: what the changes read of each commit they
 * pass (its inserts), where planning the whole snapshot costs all of the table's manifests, once a
 * commit.
 *
 * Read at the snapshot that added it at the snapshot's own sequence number, a file's rows can only
 * be deleted by that snapshot's own position deletes and deletion vectors: an equality delete
 * applies to rows of a lower sequence number only, an older delete cannot name a file not yet
 * written, and no later commit is read. So each task carries the snapshot's position delete files
 * that may name its file (one more is harmless: a reader keeps a file's positions by its path).
 * Files are pruned as Iceberg's planning prunes them, by partition and column metrics, so the
 * tasks are those it would plan (Iceberg's Spark scan may rely on the pruning), without the files'
 * column stats, as Iceberg's tasks for Spark are.
 */
object AddedFileTasks {

  /**
   * The tasks of `files` at `snapshotId` when that snapshot added all of them at its own sequence
   * number (not a rewrite's files, which keep an older one); None otherwise.
   */
  def of(table: Table, snapshotId: Long, files: Set[String], filter: Expression, caseSensitive: Boolean): Option[IndexedSeq[FileScanTask]] =
    Option(table.snapshot(snapshotId)).filter(_ => files.nonEmpty).flatMap { snapshot =>
      val added = snapshot.addedDataFiles(table.io()).asScala.filter(f => files.contains(f.location())).toVector
      val own = added.forall(f => Option(f.dataSequenceNumber()).exists(_.longValue == snapshot.sequenceNumber()))
      if (added.map(_.location()).toSet != files || !own) None
      else {
        val positional = snapshot.addedDeleteFiles(table.io()).asScala.filter(_.content() == FileContent.POSITION_DELETES).toVector
        // As Iceberg's planning: each spec bound to the table's schema, a file kept when its
        // partition and its column metrics can hold a matching row, its task without the stats.
        val bySpec = scala.collection.mutable.HashMap.empty[Int, (PartitionSpec, Evaluator, InclusiveMetricsEvaluator)]
        def specOf(f: DataFile) = bySpec.getOrElseUpdate(f.specId(), {
          val spec = table.specs().get(f.specId())
          (spec, new Evaluator(spec.partitionType(), Projections.inclusive(spec, caseSensitive).project(filter), caseSensitive),
            new InclusiveMetricsEvaluator(spec.schema(), filter, caseSensitive))
        })
        Some(added.flatMap { f =>
          val (spec, partition, metrics) = specOf(f)
          if (!partition.eval(f.partition()) || !metrics.eval(f)) None
          else {
            val deletes = positional.filter(d => IcebergInternals.referencedDataFile(d).forall(_ == f.location()) && mayName(d, f))
            Some(IcebergInternals.fileScanTask(f.copyWithoutStats(), deletes.toArray, spec.schema(), spec, filter, caseSensitive))
          }
        })
      }
    }

  /** Whether the rows of position delete file `delete` can name `file`, by the bounds of their paths. */
  def mayName(delete: DeleteFile, file: DataFile): Boolean = {
    val id = IcebergInternals.positionDeletePathFieldId
    def bound(bounds: java.util.Map[Integer, java.nio.ByteBuffer]) =
      Option(bounds).flatMap(b => Option(b.get(id))).map(Conversions.fromByteBuffer[CharSequence](Types.StringType.get(), _))
    (bound(delete.lowerBounds()), bound(delete.upperBounds())) match {
      case (Some(low), Some(high)) =>
        val order = Comparators.charSequences()
        order.compare(low, file.location()) <= 0 && order.compare(file.location(), high) <= 0
      case _ => true
    }
  }
}
