import { limitOf, optional, seg, UsageError, type Command, type Ctx } from "../command";
import { table } from "../output";
import { safe } from "../printable.logic";

const ACTIONS = ["retry", "rerun", "cancel"];
/** How long `runs bulk --wait` follows a job, and how often it looks. */
const WAIT_MS = 10 * 60_000;
const POLL_MS = 500;

/** A bulk job for people: what it does to which runs, and how far it got. */
function describeJob(j: any): string {
  const filter = Object.entries(j.filter as Record<string, string>)
    .map(([k, v]) => `${k}=${v}`)
    .join(" ");
  const lines = [
    safe`${j.id}  ${j.action}  ${j.status}  ${filter}`,
    safe`matched ${j.matched} of about ${j.total}${j.total_capped ? "+" : ""}: ${j.done} done, ${j.failed} failed`,
  ];
  if (j.last_error) lines.push(safe`last error: ${j.last_error}`);
  return lines.join("\n");
}

/** The filter from the options: only those given. */
function filterOf(c: Ctx): Record<string, string> {
  const fields: [string, string][] = [
    ["workflow", "workflow_id"],
    ["status", "status"],
    ["created-after", "created_after"],
    ["created-before", "created_before"],
    ["failed-step", "failed_step"],
  ];
  return Object.fromEntries(
    fields.flatMap(([option, field]) => (optional(c, option) === undefined ? [] : [[field, optional(c, option)!]])),
  );
}

export const BULK_COMMANDS: Record<string, Command> = {
  "runs bulk": {
    args: "retry|rerun|cancel [--workflow WORKFLOW_ID] [--status STATUS] [--created-after TIME] [--created-before TIME] [--failed-step STEP_ID] [--wait]",
    summary: "retry, rerun or cancel every run a filter picks, as a background job",
    details:
      "POST /runs/bulk (workflows:write): prints the job; --wait follows it until it ends (exit 1 if any run failed).\nThe filter needs --workflow or a time range (ISO 8601 times). One job runs at a time per environment.",
    options: {
      workflow: { type: "string" },
      status: { type: "string" },
      "created-after": { type: "string" },
      "created-before": { type: "string" },
      "failed-step": { type: "string" },
      wait: { type: "boolean" },
    },
    positionals: 1,
    async run(c) {
      const action = c.positionals[0];
      if (!ACTIONS.includes(action)) throw new UsageError(`the action must be one of ${ACTIONS.join(", ")}`);
      let { data } = await c.api().call("POST", "/runs/bulk", { action, filter: filterOf(c) });
      if (c.values.wait === true) {
        for (const until = Date.now() + WAIT_MS; data.status === "running" && Date.now() < until;) {
          await new Promise((ok) => setTimeout(ok, POLL_MS));
          ({ data } = await c.api().call("GET", `/runs/bulk/${seg(data.id)}`));
        }
      }
      c.out.line(data, describeJob(data));
      return c.values.wait === true && (data.status === "running" || data.failed > 0) ? 1 : 0;
    },
  },
  "runs bulk-list": {
    args: "[--limit N]",
    summary: "the bulk jobs of the key's environment, newest first",
    options: { limit: { type: "string" } },
    async run(c) {
      const { data } = await c.api().call<any[]>("GET", `/runs/bulk?limit=${limitOf(c)}`);
      if (c.out.json) for (const j of data) c.out.line(j);
      else c.out.line(data, table(data, ["id", "action", "status", "matched", "done", "failed", "created_at"]));
    },
  },
  "runs bulk-get": {
    args: "JOB_ID",
    summary: "a bulk job's progress: runs matched, done and failed",
    positionals: 1,
    async run(c) {
      const { data } = await c.api().call("GET", `/runs/bulk/${seg(c.positionals[0])}`);
      c.out.line(data, describeJob(data));
    },
  },
  "runs bulk-cancel": {
    args: "JOB_ID",
    summary: "stop a bulk job (the batch under way finishes)",
    positionals: 1,
    async run(c) {
      const { data } = await c.api().call("POST", `/runs/bulk/${seg(c.positionals[0])}/cancel`);
      c.out.line(data, describeJob(data));
    },
  },
};
