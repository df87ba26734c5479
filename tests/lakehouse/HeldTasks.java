import java.io.File;
import java.io.IOException;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.spark.SparkContext;
import org.apache.spark.TaskContext;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.api.plugin.SparkPlugin;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerStageSubmitted;

/**
 * A Spark plugin for tests (spark.plugins=HeldTasks): while the file named by
 * spark.heldTasks.while exists, every task of a job group whose id starts with one of the
 * prefixes spark.heldTasks.groups lists (comma-separated; by default "eqdelete-maintain-", a round
 * of maintain; "REWRITE-DATA-FILES-": Iceberg's data file rewrite) waits before it runs, after
 * creating that file's name plus ".held" once. A stage of the round is held so, until the file goes or the task is
 * cancelled: the wait is a sleep, which a cancelled task's interrupt ends.
 *
 * With spark.heldTasks.callSite, only the last task of each stage whose call site (its name in
 * Spark's UI) contains it waits: the stage's other tasks finish first (local mode, one slot: tasks
 * start in partition order), so a write stage is stopped with finished tasks behind it. Local mode only: the driver's listener tells
 * the executor's side (one JVM) which stages are meant.
 */
public class HeldTasks implements SparkPlugin {
  /** The last partition of each stage meant, by stage id (filled on the driver, read by the executor's side). */
  private static final Map<Integer, Integer> LAST_OF_STAGE = new ConcurrentHashMap<>();

  @Override
  public DriverPlugin driverPlugin() {
    return new DriverPlugin() {
      @Override
      public Map<String, String> init(SparkContext sc, PluginContext ctx) {
        String callSite = sc.getConf().get("spark.heldTasks.callSite", "");
        if (!callSite.isEmpty()) {
          sc.addSparkListener(new SparkListener() {
            @Override
            public void onStageSubmitted(SparkListenerStageSubmitted submitted) {
              if (submitted.stageInfo().name().contains(callSite)) {
                LAST_OF_STAGE.put(submitted.stageInfo().stageId(), submitted.stageInfo().numTasks() - 1);
              }
            }
          });
        }
        return java.util.Collections.emptyMap();
      }
    };
  }

  @Override
  public ExecutorPlugin executorPlugin() {
    return new ExecutorPlugin() {
      private File hold;
      private String[] groups;
      private boolean byCallSite;

      @Override
      public void init(PluginContext ctx, Map<String, String> extraConf) {
        hold = new File(ctx.conf().get("spark.heldTasks.while"));
        groups = ctx.conf().get("spark.heldTasks.groups", "eqdelete-maintain-").split(",");
        byCallSite = !ctx.conf().get("spark.heldTasks.callSite", "").isEmpty();
      }

      @Override
      public void onTaskStart() {
        TaskContext task = TaskContext.get();
        String group = task == null ? null : task.getLocalProperty("spark.jobGroup.id");
        if (group == null || java.util.Arrays.stream(groups).noneMatch(group::startsWith)) {
          return;
        }
        if (byCallSite && !Integer.valueOf(task.partitionId()).equals(LAST_OF_STAGE.get(task.stageId()))) {
          return;
        }
        try {
          if (hold.exists()) {
            new File(hold.getPath() + ".held").createNewFile();
          }
          while (hold.exists()) {
            Thread.sleep(100);
          }
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new RuntimeException("a held task was interrupted (cancelled)", e);
        } catch (IOException e) {
          throw new RuntimeException(e);
        }
      }
    };
  }
}
