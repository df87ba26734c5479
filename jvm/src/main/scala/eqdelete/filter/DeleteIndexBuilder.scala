package eqdelete.filter

import scala.collection.mutable.ArrayBuilder

import eqdelete.explain.JobDescription
import eqdelete.index.{DeleteKeyIndex, HashedKeyIndex, IndexCapacityException, KeyBits, KeyBytes, KeyHash, LongKeyIndex}
import eqdelete.planning.EqualityDeleteSet
import eqdelete.read.{DeleteRowReader, DeleteRows}

import org.apache.spark.SparkContext
import org.apache.spark.broadcast.Broadcast
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.types.DataType

/**
 * Builds the filter strategy's index of one equality set with bounded driver memory: Spark
 * tasks read the delete files and each ships its rows in a compact [[DeleteRowBatch]], which
 * the query's thread adds to the index as it arrives, while later tasks still read, and then
 * drops: batches wait at 24 bytes a row for one integral key, never as the boxed rows a
 * `collect()` would hold several times over.
 *
 * Rows covered by a single-column set's index (`coverers`, see `cost.Covering`) are dropped in
 * the tasks, before they are shipped, and counted.
 *
 * Running out of memory while adding a batch is caught (on the query's thread, never Spark's
 * scheduler thread, where it would stop the SparkContext), the job cancelled, and reported as
 * [[FilterIndexMemoryException]];
 * keys that outgrow one index (2 GB of packed keys) as [[FilterIndexCapacityException]].
 */
object DeleteIndexBuilder {

  /** The index of `source`'s set, built and broadcast, with the count of covered rows dropped. */
  def build(
      context: SparkContext,
      source: DeleteKeyIndexSource,
      coverers: Seq[(Broadcast[DeleteKeyIndex], Int)]): DeleteIndexCache.BuiltIndex = {
    val set = source.indexed.set
    def outOfMemory(e: OutOfMemoryError) = new FilterIndexMemoryException(set, source.indexed.estimatedBytes, e)
    val (index, covered) = try buildIndex(context, source, coverers) catch {
      case e: OutOfMemoryError => throw outOfMemory(e)
      case e: IndexCapacityException => throw new FilterIndexCapacityException(set, e)
    }
    val broadcast = try context.broadcast(index) catch { case e: OutOfMemoryError => throw outOfMemory(e) }
    DeleteIndexCache.BuiltIndex(broadcast, covered)
  }

  private def buildIndex(
      context: SparkContext,
      source: DeleteKeyIndexSource,
      coverers: Seq[(Broadcast[DeleteKeyIndex], Int)]): (DeleteKeyIndex, Long) = {
    val indexed = source.indexed
    var index = DeleteKeyIndex.forKeyTypes(indexed.keyTypes, indexed.read.records)
    val reader = new DeleteRowReader(source.io, source.readSchema, indexed.set.equalityIds)
    val rows = DeleteRows.rdd(context, reader, indexed.read.files, indexed.read.tasks, indexed.set.describeKeys)
    val keyTypes = indexed.keyTypes
    val rowsPerTask = indexed.read.records / indexed.read.tasks // a size hint: files are about alike
    val batches = rows.mapPartitions { rows =>
      if (coverers.isEmpty) Iterator(DeleteRowBatch(rows, keyTypes, rowsPerTask))
      else {
        var covered = 0L
        val kept = rows.filter { row =>
          val (scope, seq) = (row.getLong(keyTypes.size), row.getLong(keyTypes.size + 1))
          val isCovered = coverers.exists { case (coverer, position) =>
            coverer.value.covers(scope, Array(row.get(position, keyTypes(position))), seq)
          }
          if (isCovered) covered += 1
          !isCovered
        }
        val batch = DeleteRowBatch(kept, keyTypes, rowsPerTask) // consumes `kept`, counting as it goes
        Iterator(batch.withCovered(covered))
      }
    }
    // Each task's batch is handed over as its result arrives and added here, on the query's
    // thread, while later tasks still read: adding on Spark's scheduler thread (where result
    // handlers run) would hold up the launch of the next tasks for as long as it takes.
    val arrived = new java.util.concurrent.LinkedBlockingQueue[DeleteRowBatch]()
    var covered = 0L
    var failure: Throwable = null
    val job = JobDescription.during(context, s"eqdelete: ${indexed.describe}") {
      context.submitJob(batches, (rows: Iterator[DeleteRowBatch]) => rows.next(), 0 until batches.getNumPartitions,
        (_: Int, batch: DeleteRowBatch) => arrived.put(batch), ())
    }
    // Spark hands over every result before it marks the job complete.
    while (!job.isCompleted || !arrived.isEmpty) {
      val batch = arrived.poll(50, java.util.concurrent.TimeUnit.MILLISECONDS)
      if (batch != null) {
        if (failure == null) {
          covered += batch.covered
          try batch.addTo(index) catch {
            case e @ (_: OutOfMemoryError | _: IndexCapacityException) =>
              index = null // let the collector have it back before anything else needs memory
              failure = e
              job.cancel()
          }
        }
      }
    }
    if (failure != null) throw failure
    // The job's own failure (a delete file that cannot be read), as runJob would throw it.
    job.get()
    (index.seal(), covered)
  }
}

/**
 * The delete rows one task read, as it ships them: for one integral or floating-point key,
 * (key bits, scope, seq) triples in a long array (24 bytes a row) and NULL keys as (scope, seq)
 * pairs; for other keys, (hash, scope, seq) triples and the keys packed ([[KeyBytes]]) one
 * after the other, each after its 4-byte length.
 */
final class DeleteRowBatch private (
    triples: Array[Long],
    nullKeys: Array[Long],
    packed: Array[Byte],
    val covered: Long)
  extends Serializable {

  /** The same rows, and `n` rows dropped as covered before them. */
  def withCovered(n: Long): DeleteRowBatch = new DeleteRowBatch(triples, nullKeys, packed, n)

  def addTo(index: DeleteKeyIndex): Unit = index match {
    case hashed: HashedKeyIndex =>
      var i = 0
      var at = 0
      while (i < triples.length) {
        val length = KeyBytes.readLength(packed, at)
        hashed.addPacked(triples(i), triples(i + 1), packed, at + KeyBytes.LengthBytes, length, triples(i + 2))
        at += KeyBytes.LengthBytes + length
        i += 3
      }
    case longs: LongKeyIndex =>
      var i = 0
      while (i < triples.length) {
        longs.addBits(triples(i + 1), triples(i), triples(i + 2))
        i += 3
      }
      i = 0
      while (i < nullKeys.length) {
        index.add(nullKeys(i), Array[Any](null), nullKeys(i + 1))
        i += 2
      }
  }
}

object DeleteRowBatch {
  /** The batch of `rows`: (key values..., scope, seq) as [[eqdelete.read.DeleteRows]] reads them. */
  def apply(rows: Iterator[InternalRow], keyTypes: Seq[DataType], expectedRows: Long = 0): DeleteRowBatch = {
    val triples = new ArrayBuilder.ofLong
    triples.sizeHint(math.min(3 * expectedRows, Int.MaxValue - 8L).toInt)
    val types = keyTypes.toArray
    val (scopeAt, seqAt) = (types.length, types.length + 1)
    if (DeleteKeyIndex.isPrimitive(keyTypes)) {
      val nulls = new ArrayBuilder.ofLong
      val keyType = types(0)
      rows.foreach { row =>
        if (row.isNullAt(0)) nulls += row.getLong(scopeAt) += row.getLong(seqAt)
        else triples += KeyBits.at(row, 0, keyType) += row.getLong(scopeAt) += row.getLong(seqAt)
      }
      new DeleteRowBatch(triples.result(), nulls.result(), Array.emptyByteArray, 0L)
    } else {
      val key = new KeyBytes
      val keys = new Array[Any](types.length)
      val packed = new java.io.ByteArrayOutputStream()
      val length = new Array[Byte](KeyBytes.LengthBytes)
      rows.foreach { row =>
        var i = 0
        while (i < types.length) {
          keys(i) = row.get(i, types(i))
          i += 1
        }
        KeyBytes.pack(types, keys, key)
        triples += KeyHash.of(keys) += row.getLong(scopeAt) += row.getLong(seqAt)
        KeyBytes.writeLength(length, 0, key.length)
        packed.write(length)
        packed.write(key.bytes, 0, key.length)
      }
      new DeleteRowBatch(triples.result(), Array.emptyLongArray, packed.toByteArray, 0L)
    }
  }
}

/** The driver ran out of memory building a filter index; the query fails, the session stays. */
final class FilterIndexMemoryException(set: EqualityDeleteSet, estimatedBytes: Long, cause: OutOfMemoryError)
  extends RuntimeException(
    s"eqdelete: the driver ran out of memory building the filter strategy's index of ${set.records} delete " +
      s"row(s) on ${set.describeKeys} (estimated ${estimatedBytes >> 20} MB); use spark.eqdelete.strategy=join, " +
      "unset spark.eqdelete.filter.force, or give the driver more memory", cause)

/** The delete keys do not fit one filter index; the query fails saying so, the session stays. */
final class FilterIndexCapacityException(set: EqualityDeleteSet, cause: IndexCapacityException)
  extends RuntimeException(
    s"eqdelete: the filter strategy's index of ${set.records} delete row(s) on ${set.describeKeys} cannot be " +
      s"built: ${cause.getMessage}; use spark.eqdelete.strategy=join or unset spark.eqdelete.filter.force", cause)
