package eqdelete.cost

import org.apache.spark.sql.eqdelete.compat.EqDeleteConf
import org.apache.spark.sql.internal.SQLConf

/**
 * What a scan's deletes are applied with. Chosen by [[CostModel]], carried by the plan and the
 * decision; `name` is the word the setting, EXPLAIN and the decision records use.
 */
sealed abstract class Strategy(val name: String) {
  override def toString: String = name
}

object Strategy {
  case object Native extends Strategy(EqDeleteConf.Strategy.Native)
  case object Filter extends Strategy(EqDeleteConf.Strategy.Filter)
  case object Join extends Strategy(EqDeleteConf.Strategy.Join)

  val all: Seq[Strategy] = Seq(Native, Filter, Join)
}

/** The `spark.eqdelete.strategy` setting, parsed once: the cost model's choice, or one strategy. */
sealed trait StrategySetting

object StrategySetting {
  case object Auto extends StrategySetting
  final case class Forced(strategy: Strategy) extends StrategySetting

  /** A value the setting's declaration accepts (it checks values before a query sees them). */
  def parse(value: String): StrategySetting =
    if (value == EqDeleteConf.Strategy.Auto) Auto
    else Forced(Strategy.all.find(_.name == value).getOrElse(
      throw new IllegalArgumentException(s"unknown strategy '$value': one of ${EqDeleteConf.Strategy.all.mkString(", ")}")))

  def of(conf: SQLConf): StrategySetting = parse(EqDeleteConf.strategy(conf))
}
