package eqdelete.cost

import org.apache.spark.sql.eqdelete.compat.EqDeleteConf
import org.apache.spark.sql.internal.SQLConf

/** The `spark.eqdelete.maintain.liveIndex` setting, parsed once. */
sealed trait LiveIndexSetting

object LiveIndexSetting {
  /** Each round chooses ([[MaintainRoundPlan.choose]]). */
  case object Auto extends LiveIndexSetting
  case object Always extends LiveIndexSetting
  case object Never extends LiveIndexSetting

  /** A value the setting's declaration accepts; `true` and `false`, its values before `auto`, are always and never. */
  def parse(value: String): LiveIndexSetting = value match {
    case EqDeleteConf.LiveIndex.Auto => Auto
    case EqDeleteConf.LiveIndex.Always | "true" => Always
    case EqDeleteConf.LiveIndex.Never | "false" => Never
    case other => throw new IllegalArgumentException(
      s"unknown live index setting '$other': one of ${EqDeleteConf.LiveIndex.all.mkString(", ")}")
  }

  def of(conf: SQLConf): LiveIndexSetting = parse(EqDeleteConf.maintainLiveIndex(conf))
}

/**
 * How one round of a long-running `maintain` finds the rows its equality deletes remove, and why.
 */
sealed trait MaintainRoundPlan { def why: String }

object MaintainRoundPlan {
  /** Through the table's kept index of its live rows, built from the table first when none is held. */
  final case class ThroughIndex(why: String) extends MaintainRoundPlan

  /**
   * By reading the key columns of the data files the deletes pair with, as a round run once does;
   * a held index is dropped. (Keeping it up instead would cost a lookup's worth besides: its
   * resolved rows routed to their stores and removed, which rounds through it pay too.)
   */
  final case class ReadingDataFiles(why: String) extends MaintainRoundPlan

  /**
   * What the choice reads, metadata only: the data files (and their rows) reading would read,
   * the round's equality delete rows, and whether the table's index is held and can be brought
   * forward (not to be built again).
   */
  final case class Facts(dataFilesToRead: Int, dataRowsToRead: Long, deleteRows: Long, indexHeld: Boolean)

  // Per-row costs on 2 cores (PERFORMANCE.md: "maintain with the kept index", rounds of 10^3 to
  // 10^5 delete rows on tables of 10^6 to 3x10^8 rows; and the stream's rounds of ~480k delete
  // rows on 10^8, about even there). Reading costs ~45 ns a data row, a key read and joined; a
  // lookup ~8 us a delete row beyond what both ways pay for it (routed to its store, sorted,
  // looked up, its entry removed), plus ~0.1 s of its jobs. Both write the same deletes.
  private[cost] val ReadNanosPerDataRow = 45L
  private[cost] val LookupNanosPerDeleteRow = 8000L
  private[cost] val LookupJobsNanos = 100000000L
  /**
   * How far one way must be ahead before a round leaves the index it holds, or builds one it
   * lacks: a build costs a read of every data file's keys and more, so rounds near the crossing
   * do not drop and build it by turns.
   */
  private[cost] val Margin = 1.5

  /** The cheaper way for this round, as `setting` allows. */
  def choose(setting: LiveIndexSetting, facts: Facts): MaintainRoundPlan = setting match {
    case LiveIndexSetting.Always => ThroughIndex("spark.eqdelete.maintain.liveIndex is always")
    case LiveIndexSetting.Never => ReadingDataFiles("spark.eqdelete.maintain.liveIndex is never")
    case LiveIndexSetting.Auto =>
      val reading = facts.dataRowsToRead * ReadNanosPerDataRow
      val lookups = LookupJobsNanos + facts.deleteRows * LookupNanosPerDeleteRow
      val costs = f"reading ${facts.dataFilesToRead}%,d data files (${facts.dataRowsToRead}%,d rows) ~${reading / 1e9}%.2f s, " +
        f"looking ${facts.deleteRows}%,d delete rows up in the index ~${lookups / 1e9}%.2f s"
      if (facts.indexHeld) {
        if (lookups <= Margin * reading) ThroughIndex(costs)
        else ReadingDataFiles(s"$costs: so this round read the data files, and the index was dropped")
      } else {
        // An index not held is built by the round that would use it: rounds alike repay it.
        if (Margin * lookups <= reading) ThroughIndex(costs) else ReadingDataFiles(costs)
      }
  }
}
