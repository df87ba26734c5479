package eqdelete.filter

import scala.collection.mutable.ArrayBuilder

import eqdelete.explain.JobDescription
import eqdelete.index.{DeleteKeyIndex, KeyBits, LongKeyIndex}
import eqdelete.planning.EqualityDeleteSet
import eqdelete.read.{DeleteRowReader, DeleteRows}

import org.apache.spark.SparkContext
import org.apache.spark.broadcast.Broadcast

/**
 * Builds the filter strategy's index of one equality set with bounded driver memory: Spark
 * tasks read the delete files and each ships its rows in a compact [[DeleteRowBatch]], which
 * the driver adds to the index as that task finishes and then drops, so the driver never holds
 * every delete row at once (a `collect()` would, several times over as boxed objects).
 *
 * Rows covered by a single-column set's index (`coverers`, see `cost.Covering`) are dropped in
 * the tasks, before they are shipped, and counted.
 *
 * Running out of memory while adding a batch is caught before it reaches Spark's scheduler
 * thread, where it would stop the SparkContext, and reported as [[FilterIndexMemoryException]].
 */
object DeleteIndexBuilder {

  /** The index of `source`'s set, built and broadcast, with the count of covered rows dropped. */
  def build(
      context: SparkContext,
      source: DeleteKeyIndexSource,
      coverers: Seq[(Broadcast[DeleteKeyIndex], Int)]): DeleteIndexCache.BuiltIndex = {
    val set = source.indexed.set
    def outOfMemory(e: OutOfMemoryError) = new FilterIndexMemoryException(set, source.indexed.estimatedBytes, e)
    val (index, covered) = try buildIndex(context, source, coverers) catch { case e: OutOfMemoryError => throw outOfMemory(e) }
    val broadcast = try context.broadcast(index) catch { case e: OutOfMemoryError => throw outOfMemory(e) }
    DeleteIndexCache.BuiltIndex(broadcast, covered)
  }

  private def buildIndex(
      context: SparkContext,
      source: DeleteKeyIndexSource,
      coverers: Seq[(Broadcast[DeleteKeyIndex], Int)]): (DeleteKeyIndex, Long) = {
    val indexed = source.indexed
    var index = DeleteKeyIndex.forKeyTypes(indexed.keyTypes, indexed.read.records)
    val integral = index.isInstanceOf[LongKeyIndex]
    val reader = new DeleteRowReader(source.io, source.readSchema, indexed.set.equalityIds)
    val rows = DeleteRows.rdd(context, reader, indexed.read.files, indexed.read.tasks, indexed.set.describeKeys)
    val batches = rows.mapPartitions { rows =>
      if (coverers.isEmpty) Iterator(DeleteRowBatch(rows, integral))
      else {
        var covered = 0L
        val kept = rows.filter { case (keys, scope, seq) =>
          val isCovered = coverers.exists { case (coverer, position) => coverer.value.covers(scope, Array(keys(position)), seq) }
          if (isCovered) covered += 1
          !isCovered
        }
        val batch = DeleteRowBatch(kept, integral) // consumes `kept`, counting as it goes
        Iterator(batch.withCovered(covered))
      }
    }
    var covered = 0L
    var failure: OutOfMemoryError = null
    // Spark calls the handler on one thread at a time, as each task's result arrives.
    JobDescription.during(context, s"eqdelete: ${indexed.describe}") {
      context.runJob(batches, (rows: Iterator[DeleteRowBatch]) => rows.next(), (_: Int, batch: DeleteRowBatch) =>
        if (failure == null) {
          covered += batch.covered
          try batch.addTo(index) catch {
            case e: OutOfMemoryError =>
              index = null // let the collector have it back before anything else needs memory
              failure = e
          }
        })
    }
    if (failure != null) throw failure
    (index.seal(), covered)
  }
}

/**
 * The delete rows one task read, as it ships them: for one integral or floating-point key, (key bits, scope, seq)
 * triples in a long array (24 bytes a row) and NULL keys as (scope, seq) pairs; for other keys,
 * the rows themselves.
 */
final class DeleteRowBatch private (
    triples: Array[Long],
    nullKeys: Array[Long],
    rows: Array[(Array[Any], Long, Long)],
    val covered: Long)
  extends Serializable {

  /** The same rows, and `n` rows dropped as covered before them. */
  def withCovered(n: Long): DeleteRowBatch = new DeleteRowBatch(triples, nullKeys, rows, n)

  def addTo(index: DeleteKeyIndex): Unit = {
    var i = 0
    while (i < triples.length) {
      index.add(triples(i + 1), Array[Any](triples(i)), triples(i + 2))
      i += 3
    }
    i = 0
    while (i < nullKeys.length) {
      index.add(nullKeys(i), Array[Any](null), nullKeys(i + 1))
      i += 2
    }
    rows.foreach { case (keys, scope, seq) => index.add(scope, keys, seq) }
  }
}

object DeleteRowBatch {
  def apply(rows: Iterator[(Array[Any], Long, Long)], integral: Boolean): DeleteRowBatch =
    if (!integral) new DeleteRowBatch(Array.emptyLongArray, Array.emptyLongArray, rows.toArray, 0L)
    else {
      val triples = new ArrayBuilder.ofLong
      val nulls = new ArrayBuilder.ofLong
      rows.foreach { case (keys, scope, seq) =>
        keys(0) match {
          case null => nulls += scope += seq
          case key => triples += KeyBits.of(key) += scope += seq
        }
      }
      new DeleteRowBatch(triples.result(), nulls.result(), Array.empty, 0L)
    }
}

/** The driver ran out of memory building a filter index; the query fails, the session stays. */
final class FilterIndexMemoryException(set: EqualityDeleteSet, estimatedBytes: Long, cause: OutOfMemoryError)
  extends RuntimeException(
    s"eqdelete: the driver ran out of memory building the filter strategy's index of ${set.records} delete " +
      s"row(s) on ${set.describeKeys} (estimated ${estimatedBytes >> 20} MB); use spark.eqdelete.strategy=join, " +
      "unset spark.eqdelete.filter.force, or give the driver more memory", cause)
