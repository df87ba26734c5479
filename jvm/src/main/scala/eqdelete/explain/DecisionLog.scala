package eqdelete.explain

import java.util.{Collections, WeakHashMap}

import scala.jdk.CollectionConverters._
import scala.util.Try

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.eqdelete.compat.SparkInternals
import org.apache.spark.sql.catalyst.plans.logical.{Command, CommandResult, LogicalPlan, V2CreateTableAsSelectPlan}
import org.apache.spark.sql.execution.QueryExecution
import org.apache.spark.sql.util.QueryExecutionListener

/** A relation that reports on other queries (eqdelete's table-valued functions): a query reading
  * one is not the last query the decision log reports. */
trait Introspection

/** The decisions of the last query each session ran, kept by a query execution listener. */
object DecisionLog {
  private val last = Collections.synchronizedMap(new WeakHashMap[SparkSession, Seq[Decision]]())
  private val listening = Collections.synchronizedMap(new WeakHashMap[SparkSession, java.lang.Boolean]())

  /** Called from the rule, not the extension: the listener manager needs a built session state. */
  def register(session: SparkSession): Unit = listening.synchronized {
    if (!listening.containsKey(session)) {
      listening.put(session, true)
      session.listenerManager.register(new Listener(session))
    }
  }

  def lastQuery(session: SparkSession): Seq[Decision] = {
    // So a caller sees its own last query; a bus still busy after a minute gives the last delivered.
    SparkInternals.waitForListeners(session)
    Option(last.get(session)).getOrElse(Nil)
  }

  /** For Python: the decisions in a plan, as maps of their record fields (None as null). */
  def ofPlanAsJava(plan: org.apache.spark.sql.catalyst.plans.logical.LogicalPlan): java.util.List[java.util.Map[String, Any]] =
    Decisions.of(plan).map(_.record.map {
      case (name, value: Option[_]) => name -> value.getOrElse(null)
      case field => field
    }.asJava).asJava

  private final class Listener(session: SparkSession) extends QueryExecutionListener {
    // Collecting or showing the result of a command Spark already ran (DELETE, UPDATE, MERGE)
    // runs nothing: the decisions of that command stay the last ones. A command that runs its
    // query as an execution of its own (CREATE/REPLACE TABLE AS SELECT, a v1 source's CTAS,
    // INSERT OVERWRITE DIRECTORY: the query a child it plans itself, or a leaf's inner child) has
    // had that execution reported before it: those decisions are the statement's. A query that
    // failed analysis has no optimized plan: Try, and keep the last decisions. A query of eqdelete's
    // own table-valued functions reports on other queries and is not one to report on.
    private def record(qe: QueryExecution): Unit = Try(qe.optimizedPlan).foreach {
      case _: CommandResult | _: V2CreateTableAsSelectPlan =>
      case introspection if introspection.exists(_.isInstanceOf[Introspection]) =>
      case command: Command if command.children.isEmpty && command.innerChildren.exists(_.isInstanceOf[LogicalPlan]) =>
      case plan => Try(Decisions.of(plan)).foreach(decisions => last.put(session, decisions))
    }

    override def onSuccess(funcName: String, qe: QueryExecution, durationNs: Long): Unit = record(qe)
    override def onFailure(funcName: String, qe: QueryExecution, exception: Exception): Unit = record(qe)
  }
}
