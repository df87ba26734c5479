package eqdelete.cost

import eqdelete.deleteindex.DeleteKeyIndex
import eqdelete.planning.{EqualityDeleteRef, EqualityDeleteSet}

import org.apache.spark.sql.types.DataType

/** How eqdelete reads one scan's rows: computed once by [[CostModel]], only executed by the builders. */
sealed trait ScanRewritePlan {
  def strategy: Strategy
  def reason: String
  /** The layout and each delete part's execution, in words (EXPLAIN and the decision records). */
  def describe: String
  /** The multi-column equality sets whose delete rows are checked against single-column ones (see [[Covering]]). */
  def coveredSets: Seq[EqualityDeleteSet] = Nil
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
    override def coveredSets: Seq[EqualityDeleteSet] = indexes.filter(_.coveredBy.nonEmpty).map(_.set)
  }

  /** Every part of every equality set becomes a left anti join ([[DeleteJoin]]). */
  final case class Join(reason: String, layout: ScanLayout, joins: Seq[DeleteJoin]) extends ScanRewritePlan {
    val strategy: Strategy = Strategy.Join
    def describe: String = (layout.describe +: joins.map(_.describe)).mkString("; ")
    override def coveredSets: Seq[EqualityDeleteSet] = joins.filter(_.coveredBy.nonEmpty).map(_.set).distinct
  }
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
  /** Joined as read, as Spark chooses (shuffled when large). */
  case object Shuffled extends JoinDistribution("shuffled")
}

/** Reading the delete rows of `files` with `tasks` Spark tasks. */
final case class DeleteRead(files: Seq[EqualityDeleteRef], tasks: Int) {
  def records: Long = files.map(_.file.recordCount()).sum
}

/**
 * The filter's index of one equality set, of `kind`, of `estimatedBytes` on the driver (at
 * most: rows covered by `coveredBy` are dropped as they are read).
 */
final case class IndexedSet(
    set: EqualityDeleteSet,
    keyTypes: Seq[DataType],
    read: DeleteRead,
    estimatedBytes: Long,
    coveredBy: Seq[Covering] = Nil,
    kind: IndexKind = IndexKind.Table) {
  /**
   * Whether the index is a [[eqdelete.deleteindex.HashedKeyIndex]] (the builder picks by the same
   * test), or, a string key whose delete keys all turn out UUIDs (or all strings of at most 15
   * bytes), a [[eqdelete.deleteindex.TwoLongKeyIndex]]: either is looked up a batch at a time.
   */
  def hashed: Boolean = kind == IndexKind.Table && !DeleteKeyIndex.isPrimitive(keyTypes, set.newestSequenceNumber)

  def describe: String =
    s"${kind.describe} of ${set.describeKeys}: ${read.files.size} file(s), ${read.records} row(s), ${read.tasks} read task(s)" +
      kind.detail + Covering.describe(coveredBy)
}

/**
 * A single-column equality set `by` (as the filter indexes it) covering rows of a multi-column
 * set: a delete row `(c = x, ...)` of sequence number s2 in scope p deletes nothing that a
 * delete `c = x` of `by` with sequence number s1 >= s2, in scope p or global, does not delete
 * already, so it is dropped before indexing or joining. `keyPosition` is c's position among the
 * multi-column set's keys.
 */
final case class Covering(by: IndexedSet, keyPosition: Int)

object Covering {
  def describe(coverings: Seq[Covering]): String =
    if (coverings.isEmpty) "" else s", rows covered by ${coverings.map(_.by.set.describeKeys).mkString(" and ")} dropped"
}

/**
 * One join with delete rows (anti when reading the table, semi when resolving its deletes): the
 * delete files of one equality set that are partition-scoped (`byScope`, joined on the scope
 * too) or global.
 */
final case class DeleteJoin(
    set: EqualityDeleteSet,
    keyTypes: Seq[DataType],
    read: DeleteRead,
    byScope: Boolean,
    distribution: JoinDistribution,
    estimatedBytes: BigInt,
    coveredBy: Seq[Covering] = Nil) {
  def describe: String =
    s"${distribution.describe} anti join on ${set.describeKeys}${if (byScope) " and partition" else " (global deletes)"}: " +
      s"${read.files.size} file(s), ${read.records} row(s), ${read.tasks} read task(s)" + Covering.describe(coveredBy)
}
