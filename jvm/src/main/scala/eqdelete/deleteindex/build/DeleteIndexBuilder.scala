package eqdelete.deleteindex.build

import org.apache.spark.util.SizeEstimator
import eqdelete.cost.IndexKind
import eqdelete.explain.JobDescription
import eqdelete.deleteindex.{DeleteKeyIndex, HashedKeyIndex, IndexCapacityException, KeyBitmapIndex, TwoLongKeyForm, TwoLongKeyIndex}
import eqdelete.read.{DeleteRowReader, DeleteRows}

import org.apache.spark.SparkContext
import org.apache.spark.broadcast.Broadcast

/**
 * Builds the filter strategy's index of one equality set with bounded driver memory: Spark
 * tasks read the delete files and each ships its rows in a compact [[DeleteRowBatch]] (8 bytes
 * a row for one integral key), never as the boxed rows a `collect()` would hold several times
 * over. The query's thread keeps the batches and, once all have arrived, adds them in one pass
 * over the index's table.
 *
 * A key bitmap (`cost.IndexKind.KeyBitmap`) is built from parts the tasks make of their own
 * keys, ORed on the driver.
 *
 * Rows covered by a single-column set's index (`coverers`, see `cost.Covering`) are dropped in
 * the tasks, before they are shipped, and counted.
 *
 * Running out of memory while taking or adding the batches is caught (on the query's thread,
 * never Spark's scheduler thread, where it would stop the SparkContext), the job cancelled if
 * it still runs, and reported as [[FilterIndexMemoryException]]; keys that outgrow one index
 * (2 GB of packed keys) as [[FilterIndexCapacityException]], once every delete file is read.
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
    val broadcast = try InProcessBroadcast.orSpark(context, index) catch { case e: OutOfMemoryError => throw outOfMemory(e) }
    DeleteIndexCache.BuiltIndex(broadcast, covered, SizeEstimator.estimate(index))
  }

  private def buildIndex(
      context: SparkContext,
      source: DeleteKeyIndexSource,
      coverers: Seq[(Broadcast[DeleteKeyIndex], Int)]): (DeleteKeyIndex, Long) = source.indexed.kind match {
    case bitmap: IndexKind.KeyBitmap => (buildBitmap(context, source, bitmap), 0L)
    case IndexKind.Table => buildTable(context, source, coverers)
  }

  /**
   * A key bitmap: each task ships the bits of its own keys, or their distances where those are
   * fewer bytes (a few hundred KB a million dense keys, ~1 MB a million spread over 6x10^7 values,
   * where the keys took 8 MB), and the driver ORs them, with no table to fill.
   */
  private def buildBitmap(context: SparkContext, source: DeleteKeyIndexSource, bitmap: IndexKind.KeyBitmap): KeyBitmapIndex = {
    val indexed = source.indexed
    val reader = new DeleteRowReader(source.io, source.readSchema, indexed.set.equalityIds)
    val keyType = indexed.keyTypes.head
    val rowsPerTask = indexed.read.records / indexed.read.tasks
    val parts = DeleteRows.perTask(context, indexed.read.files, indexed.read.tasks, indexed.set.describeKeys) { files =>
      Iterator(DeleteRowBatch.bitmapPart(files, reader, keyType, rowsPerTask))
    }
    val shipped = JobDescription.during(context, s"eqdelete: ${indexed.describe}") {
      TaskResultHandover.collect(context, parts)
    }
    KeyBitmapIndex.of(bitmap.lower, bitmap.upper, bitmap.oldestSequenceNumber, shipped.toSeq, indexed.set.describeKeys)
  }

  private def buildTable(
      context: SparkContext,
      source: DeleteKeyIndexSource,
      coverers: Seq[(Broadcast[DeleteKeyIndex], Int)]): (DeleteKeyIndex, Long) = {
    val indexed = source.indexed
    val indexKeys = indexed.read.records
    val newestSequenceNumber = indexed.set.newestSequenceNumber
    val primitive = DeleteKeyIndex.isPrimitive(indexed.keyTypes, newestSequenceNumber) // the batches' format follows the index
    // Whether the keys fit two longs is known once they are read: each task ships them so while they do.
    val twoLongs = !primitive && coverers.isEmpty && TwoLongKeyIndex.mayIndex(indexed.keyTypes, newestSequenceNumber)
    val reader = new DeleteRowReader(source.io, source.readSchema, indexed.set.equalityIds)
    val keyTypes = indexed.keyTypes
    val rowsPerTask = indexKeys / indexed.read.tasks // a size hint: files are about alike
    val batches = if (coverers.isEmpty) {
      DeleteRows.perTask(context, indexed.read.files, indexed.read.tasks, indexed.set.describeKeys) { files =>
        Iterator(
          if (primitive) DeleteRowBatch.ofKeyColumns(files, reader, keyTypes.head, indexKeys, rowsPerTask)
          else if (twoLongs) DeleteRowBatch.ofTwoLongOrHashedKeyColumns(files, reader, keyTypes, indexKeys, rowsPerTask)
          else DeleteRowBatch.ofHashedKeyColumns(files, reader, keyTypes, indexKeys, rowsPerTask))
      }
    } else DeleteRows.rdd(context, reader, indexed.read.files, indexed.read.tasks, indexed.set.describeKeys).mapPartitions { rows =>
      var covered = 0L
      val kept = rows.filter { row =>
        val (scope, seq) = (row.getLong(keyTypes.size), row.getLong(keyTypes.size + 1))
        val isCovered = coverers.exists { case (coverer, position) =>
          coverer.value.covers(scope, Array(row.get(position, keyTypes(position))), seq)
        }
        if (isCovered) covered += 1
        !isCovered
      }
      val batch = DeleteRowBatch(kept, keyTypes, primitive, indexKeys, rowsPerTask) // consumes `kept`, counting as it goes
      Iterator(batch.withCovered(covered))
    }
    // Each task's batch is handed over as its result arrives and taken here, on the query's
    // thread: adding on Spark's scheduler thread (where result handlers run) would hold up the
    // launch of the next tasks for as long as it takes. It is kept (less than the index's own
    // size, which the driver budget counts twice, for its broadcast copy) and all are added in
    // one pass over the table once every task is done: added as they came, each walked the whole
    // table again, a cache miss a key, while the read tasks wanted the cores (at 10^7 string
    // keys, more CPU than those tasks took).
    val arrived = new java.util.concurrent.LinkedBlockingQueue[DeleteRowBatch]()
    val held = scala.collection.mutable.ArrayBuffer[DeleteRowBatch]()
    var covered = 0L
    val job = JobDescription.during(context, s"eqdelete: ${indexed.describe}") {
      TaskResultHandover.submit(context, batches)((_, batch) => arrived.put(batch))
    }
    // Spark hands over every result before it marks the job complete.
    try while (!job.isCompleted || !arrived.isEmpty) {
      val batch = arrived.poll(50, java.util.concurrent.TimeUnit.MILLISECONDS)
      if (batch != null) {
        covered += batch.covered
        held += batch
      }
    } catch {
      case e: Throwable => // out of memory, or the query's thread interrupted: the job stops with it
        held.clear() // let the collector have them back before anything else needs memory
        job.cancel()
        throw e
    }
    // The job's own failure (a delete file that cannot be read), as runJob would throw it.
    job.get()
    val index =
      // A task that read no key has no form.
      if (twoLongs && held.forall(_.inTwoLongs) && held.flatMap(b => Option(b.form)).distinct.size <= 1)
        new TwoLongKeyIndex(indexKeys, held.flatMap(b => Option(b.form)).headOption.getOrElse(TwoLongKeyForm.Uuid))
      else DeleteKeyIndex.forKeyTypes(keyTypes, indexKeys, newestSequenceNumber)
    if (index.isInstanceOf[HashedKeyIndex]) {
      // Some task read a key in no form, or tasks read keys of two forms: the keys go to the hashed index as strings.
      for (i <- held.indices if held(i).inTwoLongs) held(i) = DeleteRowBatch.asHashed(held(i), keyTypes, indexKeys)
    }
    try DeleteRowBatch.addAll(held.toSeq, index, Runtime.getRuntime.availableProcessors()) finally held.clear()
    (index.seal(), covered)
  }
}
