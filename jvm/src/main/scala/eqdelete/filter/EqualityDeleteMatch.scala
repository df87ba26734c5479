package eqdelete.filter

import eqdelete.deleteindex.{DeleteKeyIndex, HashedKeyIndex, KeyBitmapIndex, KeyBits, KeyBytes, KeyHash, LongKeyIndex, TwoLongKeyIndex}
import eqdelete.deleteindex.build.BroadcastHandle

import org.apache.spark.broadcast.Broadcast
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Expression, NonSQLExpression}
import org.apache.spark.sql.catalyst.expressions.codegen.{CodegenContext, ExprCode, FalseLiteral}
import org.apache.spark.sql.catalyst.expressions.codegen.Block._
import org.apache.spark.sql.execution.metric.SQLMetric
import org.apache.spark.sql.types.{BooleanType, DataType}

/**
 * True when the row's key (NULL equal to NULL) is deleted by a delete row of the same scope
 * or a global one, with a larger sequence number than the row's data file: set membership
 * against one equality set's index, for the filter strategy.
 *
 * `index` is a scalar subquery over [[BuildDeleteKeyIndex]]: Spark runs it before this
 * expression is compiled or shipped, and its value is the handle of the broadcast index, so the
 * index travels once per executor, not inside every task.
 *
 * The key is looked up first; the row's sequence number (and, for global-only deletes, its
 * scope) is computed only for the few rows whose key has a delete.
 *
 * `lookUpInBatches`: the plan builds a [[HashedKeyIndex]] (or, its keys all UUIDs or all short strings, a
 * [[TwoLongKeyIndex]]) of this set, so where the scan reads
 * columnar batches, [[LookUpDeletedKeysInBatches]] moves the lookup into
 * [[LookUpDeletedKeysExec]], which looks up a batch's keys together.
 */
case class EqualityDeleteMatch(keys: Seq[Expression], scope: Expression, sequence: Expression, index: Expression,
    removed: Option[SQLMetric] = None, lookUpInBatches: Boolean = false) extends Expression with NonSQLExpression {

  override def children: Seq[Expression] = keys ++ Seq(scope, sequence, index)
  override def dataType: DataType = BooleanType
  override def nullable: Boolean = false
  override def prettyName: String = "eqdelete_deleted"
  override def toString: String = s"$prettyName(${keys.mkString(", ")}; index $index)"

  /** The broadcast index; only once the subquery has run (during execution). */
  private[filter] def broadcast: Broadcast[DeleteKeyIndex] = BroadcastHandle.read(index.eval(null).asInstanceOf[Array[Byte]])

  @transient private lazy val deleteKeys: DeleteKeyIndex = broadcast.value

  override def eval(input: InternalRow): Any = {
    val newest = deleteKeys.newestOf(scope.eval(input).asInstanceOf[Long], keys.map(_.eval(input)).toArray[Any])
    val deleted = newest != DeleteKeyIndex.NoDelete && sequence.eval(input).asInstanceOf[Long] < newest
    if (deleted) removed.foreach(_.add(1L))
    deleted
  }

  override protected def doGenCode(ctx: CodegenContext, ev: ExprCode): ExprCode = {
    val shipped = broadcast
    val indexValue = shipped.value
    val indexClass = indexValue.getClass.getName
    val broadcastRef = ctx.addReferenceObj("deleteKeysBroadcast", shipped, classOf[Broadcast[_]].getName)
    val indexRef = ctx.addMutableState(indexClass, "deleteKeys",
      v => s"$v = ($indexClass) $broadcastRef.value();", forceInline = true)
    // Counted where a delete is found: the predicate's OR stops at the first set that deletes a row.
    val count = removed.map(m => s"if (${ev.value}) ${ctx.addReferenceObj("rowsRemoved", m)}.add(1L);").getOrElse("")
    val keyCodes = keys.map(_.genCode(ctx))
    val scopeCode = if (indexValue.hasScoped) Some(scope.genCode(ctx)) else None
    val scopeValue = scopeCode.map(_.value.toString).getOrElse("-1L")
    val seqCode = sequence.genCode(ctx)
    val newest = ctx.freshName("newestDelete")
    // (code before the lookup, the lookup)
    val (setup, lookup) = indexValue match {
      case _: LongKeyIndex | _: KeyBitmapIndex => // the same `newest`, from the key's KeyBits
        val k = keyCodes.head
        ("", s"$indexRef.newest($scopeValue, ${k.isNull}, ${k.isNull} ? 0L : ${KeyBits.code(keys.head.dataType, k.value.toString)})")
      case _: TwoLongKeyIndex => // parsed into this task's two longs, without allocating
        val k = keyCodes.head
        val halves = ctx.addMutableState("long[]", "keyLongs", v => s"$v = new long[2];", forceInline = true)
        ("", s"${k.isNull} ? ${DeleteKeyIndex.NoDelete}L : $indexRef.newestOf($scopeValue, ${k.value}, $halves)")
      case _: HashedKeyIndex =>
        // The hash first, from the values as they are; the key is packed into this task's
        // buffer for the index only when the Bloom filter says it may hold it.
        val hash = ctx.freshName("keyHash")
        val folds = keys.zip(keyCodes).map { case (k, c) => s"$hash = ${KeyHash.code(hash, k.dataType, c.value.toString, c.isNull.toString)};" }
        val keyBytes = ctx.addMutableState(classOf[KeyBytes].getName, "keyBytes",
          v => s"$v = new ${classOf[KeyBytes].getName}();", forceInline = true)
        val packs = keys.zip(keyCodes).map { case (k, c) => KeyBytes.code(keyBytes, k.dataType, c.value.toString, c.isNull.toString) }
        val found = ctx.freshName("foundDelete")
        (s"""long $hash = ${KeyHash.Seed}L;
            |${folds.mkString("\n")}
            |long $found = ${DeleteKeyIndex.NoDelete}L;
            |if ($indexRef.mightContain($hash)) {
            |  $keyBytes.reset();
            |  ${packs.mkString("\n")}
            |  $found = $indexRef.newest($scopeValue, $hash, $keyBytes);
            |}""".stripMargin, found)
    }
    ev.copy(code = code"""
      ${keyCodes.map(_.code).mkString("\n")}
      ${scopeCode.map(_.code.toString).getOrElse("")}
      $setup
      long $newest = $lookup;
      boolean ${ev.value} = false;
      if ($newest != ${DeleteKeyIndex.NoDelete}L) {
        ${seqCode.code}
        ${ev.value} = ${seqCode.value} < $newest;
        $count
      }""", isNull = FalseLiteral)
  }

  override protected def withNewChildrenInternal(newChildren: IndexedSeq[Expression]): EqualityDeleteMatch = {
    val n = keys.length
    copy(keys = newChildren.take(n), scope = newChildren(n), sequence = newChildren(n + 1), index = newChildren(n + 2))
  }
}
