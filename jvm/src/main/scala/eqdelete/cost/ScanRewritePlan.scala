package eqdelete.cost

import eqdelete.planning.{EqualityDeleteRef, EqualityDeleteSet}

import org.apache.spark.sql.types.DataType

/** How eqdelete reads one scan's rows: computed once by [[CostModel]], only executed by the builders. */
sealed trait ScanRewritePlan {
  def strategy: Strategy
  def reason: String
  /** The layout and each delete part's execution, in words (EXPLAIN and the decision records). */
  def describe: String
}

object ScanRewritePlan {
  /** Left as Iceberg plans it. */
  final case class Native(reason: String) extends ScanRewritePlan {
    val strategy: Strategy = Strategy.Native
    def describe: String = "read natively"
  }

  /** Every equality set becomes an index, built during execution, that a filter probes. */
  final case class Filter(reason: String, layout: ScanLayout, indexes: Seq[IndexedSet]) extends ScanRewritePlan {
    val strategy: Strategy = Strategy.Filter
    def describe: String = (layout.describe +: indexes.map(_.describe)).mkString("; ")
  }

  /** Every part of every equality set becomes a left anti join. */
  final case class Join(reason: String, layout: ScanLayout, joins: Seq[AntiJoin]) extends ScanRewritePlan {
    val strategy: Strategy = Strategy.Join
    def describe: String = (layout.describe +: joins.map(_.describe)).mkString("; ")
  }
}

/** What a scan's plan applies its deletes with. */
sealed abstract class Strategy(val name: String)

object Strategy {
  case object Native extends Strategy("native")
  case object Filter extends Strategy("filter")
  case object Join extends Strategy("join")
}

/** How the rows of files with and without equality deletes reach the query. */
sealed abstract class ScanLayout(val describe: String)

object ScanLayout {
  /** One scan of every planned file, each row checked: fewer rows are in files without deletes. */
  case object OneScan extends ScanLayout("one scan of every file")
  /** Files without equality deletes read natively, in a union with the ones eqdelete applies deletes to. */
  case object Union extends ScanLayout("files without equality deletes read natively, in a union")
}

/** How a delete side reaches the join. */
sealed abstract class JoinDistribution(val describe: String)

object JoinDistribution {
  case object Broadcast extends JoinDistribution("broadcast")
  /** Reduced to the newest delete per key, then joined as Spark chooses (shuffled when large). */
  case object Shuffled extends JoinDistribution("shuffled")
}

/** Reading the delete rows of `files` with `tasks` Spark tasks. */
final case class DeleteRead(files: Seq[EqualityDeleteRef], tasks: Int) {
  def records: Long = files.map(_.file.recordCount()).sum
}

/** The filter's index of one equality set, of `estimatedBytes` on the driver. */
final case class IndexedSet(set: EqualityDeleteSet, keyTypes: Seq[DataType], read: DeleteRead, estimatedBytes: Long) {
  def describe: String =
    s"index of ${set.describeKeys}: ${read.files.size} file(s), ${read.records} row(s), ${read.tasks} read task(s)"
}

/**
 * One left anti join: the delete files of one equality set that are partition-scoped
 * (`byScope`, joined on the scope too) or global.
 */
final case class AntiJoin(
    set: EqualityDeleteSet,
    keyTypes: Seq[DataType],
    read: DeleteRead,
    byScope: Boolean,
    distribution: JoinDistribution,
    estimatedBytes: BigInt) {
  def describe: String =
    s"${distribution.describe} anti join on ${set.describeKeys}${if (byScope) " and partition" else " (global deletes)"}: " +
      s"${read.files.size} file(s), ${read.records} row(s), ${read.tasks} read task(s)"
}
