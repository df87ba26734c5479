package eqdelete

import eqdelete.deleteindex.build.PlanDeleteKeyIndexes
import eqdelete.rule.RewriteEqualityDeleteScans

import org.apache.spark.sql.SparkSessionExtensions
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.execution.{ColumnarRule, SparkPlan}
import org.apache.spark.sql.eqdelete.compat.EqDeleteConf

/** What eqdelete adds to a session, on a Spark and Iceberg it supports. */
private[eqdelete] object Injections {
  def apply(extensions: SparkSessionExtensions): Unit = {
    // Registers the spark.eqdelete.* keys so SET validates them from the first statement on,
    // and fails now, with one line, on a bad value in the application's configuration: found
    // later, while Spark builds the session state, it would break every access to that state.
    EqDeleteConf.validateSparkConf()

    // Once, after the operator optimizations have put each read's filters and columns right
    // above it, and before Spark's scan push-down, so the new scans get that push-down.
    extensions.injectPreCBORule(session => RewriteEqualityDeleteScans(session))

    // Plans the filter strategy's index subqueries, so indexes are built during execution.
    extensions.injectPlannerStrategy(_ => PlanDeleteKeyIndexes)
    // Moves the filter's lookups of hashed keys below the columnar-to-row conversion, a batch at a time.
    extensions.injectColumnar(session => new ColumnarRule {
      override def postColumnarTransitions: Rule[SparkPlan] = eqdelete.filter.LookUpDeletedKeysInBatches(session)
    })
    // Plans the join strategy's delete sides, whose nodes show what the join read and removed.
    extensions.injectPlannerStrategy(_ => eqdelete.join.PlanDeleteRows)

    // The table-valued functions that report decisions and files, and the planning of their rows.
    eqdelete.sql.TableFunctions.all.foreach(extensions.injectTableFunction)
    // The rows a range of snapshots inserted and deleted (docs/changes.md).
    extensions.injectTableFunction(eqdelete.sql.ChangesFunction.description)
    extensions.injectPlannerStrategy(_ => eqdelete.sql.PlanInformationFunctions)
    // Plans the deleted rows found in kept row images (spark.eqdelete.changes.rowImages).
    extensions.injectPlannerStrategy(_ => eqdelete.changes.PlanRowImages)

    // CALL of the procedures that commit (Spark 4.x has CALL of its own; 3.5 gets eqdelete's parser).
    eqdelete.sql.ProcedureSyntax.inject(extensions)

    // Lets anyone check, from plain SQL, that the extension is loaded and which versions run.
    extensions.injectFunction(VersionFunction.description)
  }
}
