package eqdelete.cost

import eqdelete.planning.{ScanDeletes, EqualityDeleteRef, EqualityDeleteSet}

import org.apache.iceberg.Schema
import org.apache.spark.sql.eqdelete.compat.{EqDeleteConf, IcebergSparkTables}
import org.apache.spark.sql.types.DataType

/**
 * The one place a scan's rewrite is decided, from Iceberg metadata and settings only (no data
 * is read): the strategy, the layout, each delete part's distribution and the task sizing.
 *
 * The strategy is the one set, or auto's:
 *  1. Fewer than `auto.minDataRows` rows in data files with equality deletes: native, unless
 *     Iceberg's own reader is known to read the scan wrongly (`ScanDeletes.nativeIsWrong`: keys
 *     on nested fields, or NaN keys Iceberg's per-file assignment may leave out). A rewrite
 *     adds a job reading the delete files (and an index or a join), which small scans do not repay.
 *  2. Up to `auto.filterMaxDeleteRows` delete rows, and indexes of them that fit
 *     `filter.maxHeapFraction` of the driver's heap: filter. The sweeps (PERFORMANCE.md) show it
 *     fastest there: it reads the delete files once (and keeps the index across queries), ships
 *     it once per executor, and costs each row one cache-resident lookup.
 *  3. Otherwise: join. Each part (an equality set's scoped deletes, and its global ones) is
 *     broadcast while its estimate is under `join.broadcastMaxBytes` and the same heap share,
 *     and shuffled above it, which scales to delete sets of any size.
 * A filter the user set is bounded the same way: indexes that would not fit the driver become
 * the join, unless `filter.force` says otherwise. A query calling input_file_name() gets no
 * shuffled join (the function's value stays in the task that read the row): native instead,
 * unless Iceberg's own reader would be wrong, where right rows come before file names.
 *
 * Where a single-column set keys on a column of a multi-column set, the multi-column set's rows
 * it covers ([[Covering]]) are dropped as they are read: always under the filter (its index of
 * the single column is built anyway), and under the join for shuffled parts, whose shuffle
 * shrinks with them, when the single column's index fits the filter's bounds.
 */
object CostModel {

  /** Delete rows one task reads, at most (for many small files: at least one task per core). */
  val RowsPerReadTask = 1000000L

  /**
   * The same for a key bitmap's tasks, whose own cost grows with their keys' range too: each
   * task's part is a bitmap of its keys' range, walked again for their distances, and a delete
   * file's keys usually spread over the whole range. At 3x10^7 keys over 6x10^7 values in 30
   * files (the scale benchmark, 2 cores), 30 tasks took 0.85-1.24 s and 8 took 0.71-0.98 s.
   */
  val BitmapRowsPerReadTask = 4000000L

  def plan(deletes: ScanDeletes, readSchema: Schema, settings: CostSettings): ScanRewritePlan = {
    val strategyKey = EqDeleteConf.STRATEGY.key
    lazy val indexes = indexedSets(deletes, readSchema, settings)
    lazy val overBudget = DriverMemory.filterOverBudget(indexes, settings)
    def join(reason: String) = joinPlan(deletes, readSchema, settings, reason)

    val chosen = settings.strategy match {
      case StrategySetting.Forced(Strategy.Native) => ScanRewritePlan.Native(s"$strategyKey=${Strategy.Native}")
      case StrategySetting.Forced(Strategy.Join) => join(s"$strategyKey=${Strategy.Join}")
      case StrategySetting.Forced(Strategy.Filter) if settings.filterForce => filter(deletes, indexes, s"$strategyKey=${Strategy.Filter}")
      case StrategySetting.Forced(Strategy.Filter) => overBudget match {
        case None => filter(deletes, indexes, s"$strategyKey=${Strategy.Filter}")
        case Some(why) =>
          val plan = join(s"$strategyKey=${Strategy.Filter}, but $why")
          plan.copy(reason = s"${plan.reason}: ${joinKinds(plan.joins)} instead (${EqDeleteConf.FILTER_FORCE.key}=true overrides)")
      }
      case StrategySetting.Auto => auto(deletes, indexes, overBudget, settings, join)
    }
    chosen match {
      // A shuffle moves rows out of the task that read their file, and input_file_name() with them.
      // Where Iceberg's reader is wrong, right rows matter more than the file name: the join
      // stays, and its reason says what it costs.
      case join: ScanRewritePlan.Join if settings.rowsStayInReadTask && deletes.nativeIsWrong.isEmpty &&
          join.joins.exists(_.distribution == JoinDistribution.Shuffled) =>
        ScanRewritePlan.Native(s"${join.reason}; but the query calls input_file_name() or input_file_block_*(), " +
          "which a shuffled join would lose")
      case join: ScanRewritePlan.Join if settings.rowsStayInReadTask &&
          join.joins.exists(_.distribution == JoinDistribution.Shuffled) =>
        join.copy(reason = s"${join.reason}; input_file_name() is empty for rows a shuffled join moves")
      case plan => plan
    }
  }

  private def auto(
      deletes: ScanDeletes,
      indexes: => Seq[IndexedSet],
      overBudget: => Option[String],
      settings: CostSettings,
      join: String => ScanRewritePlan.Join): ScanRewritePlan = {
    val rows = deletes.deleteRecords
    val small = deletes.rowsWithDeletes < settings.minDataRows
    if (small && deletes.nativeIsWrong.isEmpty) {
      ScanRewritePlan.Native(s"auto: ${deletes.rowsWithDeletes} rows in files with deletes < " +
        s"${EqDeleteConf.AUTO_MIN_DATA_ROWS.key}=${settings.minDataRows}; a rewrite costs more than it saves")
    } else {
      // Never native where Iceberg's own reader is known to be wrong, however small the scan.
      val prefix = if (small) s"auto: ${deletes.nativeIsWrong.get}, so never native; " else "auto: "
      if (rows <= settings.filterMaxDeleteRows && overBudget.isEmpty) {
        filter(deletes, indexes, s"$prefix$rows delete rows <= ${EqDeleteConf.AUTO_FILTER_MAX_DELETE_ROWS.key}=" +
          s"${settings.filterMaxDeleteRows} and their index (~${DriverMemory.filterBytes(indexes) >> 20} MB with its " +
          s"broadcast copy) fits ${EqDeleteConf.FILTER_MAX_HEAP_FRACTION.key} of the driver heap")
      } else {
        val why =
          if (rows > settings.filterMaxDeleteRows) s"$rows delete rows > ${EqDeleteConf.AUTO_FILTER_MAX_DELETE_ROWS.key}=${settings.filterMaxDeleteRows}"
          else overBudget.get
        val plan = join(s"$prefix$why")
        plan.copy(reason = s"${plan.reason}; ${joinKinds(plan.joins)}")
      }
    }
  }

  private def filter(deletes: ScanDeletes, indexes: Seq[IndexedSet], reason: String): ScanRewritePlan.Filter =
    ScanRewritePlan.Filter(reason, layout(deletes), indexes)

  private def joinPlan(deletes: ScanDeletes, readSchema: Schema, settings: CostSettings, reason: String): ScanRewritePlan.Join = {
    val singles = plainIndexes(deletes, readSchema, settings).filter(_.set.equalityIds.size == 1)
    val coverers =
      if (singles.forall(_.read.records <= settings.filterMaxDeleteRows) &&
        DriverMemory.filterOverBudget(singles, settings).isEmpty) singles
      else Nil
    val joins = deletes.deleteSets.flatMap { set =>
      val types = keyTypes(set, readSchema)
      val (global, scoped) = set.files.partition(_.isGlobal)
      Seq(scoped -> true, global -> false).collect { case (files, byScope) if files.nonEmpty =>
        val bytes = joinSideBytes(files, types)
        val distribution =
          if (DriverMemory.broadcasts(bytes, settings)) JoinDistribution.Broadcast else JoinDistribution.Shuffled
        val covered = if (distribution == JoinDistribution.Shuffled) coverings(set, coverers) else Nil
        DeleteJoin(set, types, read(files, settings), byScope, distribution, bytes, covered)
      }
    }
    ScanRewritePlan.Join(reason, layout(deletes), joins)
  }

  /** What the join strategy's parts are, in words; derived from the parts, so it matches them. */
  def joinKinds(joins: Seq[DeleteJoin]): String = joins.map(_.distribution).distinct match {
    case Seq(JoinDistribution.Broadcast) =>
      s"broadcast join (delete side <= ${EqDeleteConf.JOIN_BROADCAST_MAX_BYTES.key} and the heap share)"
    case Seq(JoinDistribution.Shuffled) =>
      s"shuffled join (delete side > ${EqDeleteConf.JOIN_BROADCAST_MAX_BYTES.key} or the heap share)"
    case _ =>
      "joins by size: " + joins.map(j => s"${j.distribution.describe} for ${j.set.describeKeys}" +
        (if (j.byScope) " scoped" else " global")).mkString(", ")
  }

  private def indexedSets(deletes: ScanDeletes, readSchema: Schema, settings: CostSettings): Seq[IndexedSet] = {
    val plain = plainIndexes(deletes, readSchema, settings)
    plain.map(indexed => indexed.copy(coveredBy = coverings(indexed.set, plain)))
  }

  private def plainIndexes(deletes: ScanDeletes, readSchema: Schema, settings: CostSettings): Seq[IndexedSet] =
    deletes.deleteSets.map { set =>
      val types = keyTypes(set, readSchema)
      val kind = IndexKind.of(set, types, deletes.dataFileScopes.newestSequenceNumber)
      val rowsPerTask = kind match {
        case _: IndexKind.KeyBitmap => BitmapRowsPerReadTask
        case IndexKind.Table => RowsPerReadTask
      }
      IndexedSet(set, types, read(set.files, settings, rowsPerTask), IndexKind.estimatedBytes(kind, set, types), kind = kind)
    }

  /** The single-column sets among `candidates` that key on a column of the multi-column `set`. */
  def coverings(set: EqualityDeleteSet, candidates: Seq[IndexedSet]): Seq[Covering] =
    if (set.equalityIds.size < 2) Nil
    else candidates.collect {
      case single if single.set.equalityIds.size == 1 && set.equalityIds.contains(single.set.equalityIds.head) =>
        Covering(single, set.equalityIds.indexOf(single.set.equalityIds.head))
    }

  /**
   * One scan of every file when files without deletes hold fewer rows than those with: the
   * lookups it adds cost less than passing every row through a union. Otherwise two scans,
   * unless Iceberg's per-file assignment may have left a delete out: then every file gets them.
   */
  def layout(deletes: ScanDeletes): ScanLayout =
    if (deletes.dataFilesWithoutDeletes == 0 || deletes.rowsWithoutDeletes < deletes.rowsWithDeletes ||
      deletes.assignmentMayMiss.isDefined) ScanLayout.OneScan
    else ScanLayout.Union

  /**
   * At least one task per `rowsPerTask` delete rows and, for many small files, one per core, in
   * whole waves of the cores (3 tasks on 2 cores take two tasks' time, 4 the same); never more
   * than files.
   */
  def read(files: Seq[EqualityDeleteRef], settings: CostSettings, rowsPerTask: Long = RowsPerReadTask): DeleteRead = {
    val records = files.map(_.file.recordCount()).sum
    val byRows = (records + rowsPerTask - 1) / rowsPerTask
    val cores = math.max(1L, settings.parallelism.toLong)
    val waves = (math.max(byRows, cores) + cores - 1) / cores
    val tasks = math.max(1L, math.min(files.size.toLong, waves * cores))
    DeleteRead(files, tasks.toInt)
  }

  /** A join's delete side: rows times the keys, scope and sequence number, plus a row's overhead. */
  def joinSideBytes(files: Seq[EqualityDeleteRef], keyTypes: Seq[DataType]): BigInt =
    BigInt(files.map(_.file.recordCount()).sum) * (keyTypes.map(_.defaultSize).sum + 3 * 8)

  def keyTypes(set: EqualityDeleteSet, readSchema: Schema): Seq[DataType] =
    set.equalityIds.map(id => IcebergSparkTables.sparkType(readSchema.findType(id)))
}
