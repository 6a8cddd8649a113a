import { readFileSync } from "node:fs";
import { jsonObject, limitOf, optional, seg, UsageError, type Command, type Ctx } from "../command";
import { table } from "../output";
import { safe } from "../printable.logic";

const RUN_STATUSES = ["queued", "running", "waiting", "succeeded", "failed", "cancelled"];

/** A run for people: its status, what it waits for, and each step. */
/** A run's status, with why a queued run waits (its flow-control limit and key, or the start budget). */
const statusOf = (r: any, withKey = false): string =>
  r.status === "queued" && r.queued_reason
    ? `queued (${r.queued_reason}${withKey && r.flow_key ? `, key ${r.flow_key}` : ""})`
    : String(r.status);

export function describeRun(r: any): string {
  const lines = [safe`${r.id}  ${statusOf(r, true)}  workflow ${r.workflow_id} v${r.workflow_version}  created ${r.created_at}`];
  if (r.pending_approval) lines.push(safe`waiting for approval at ${r.pending_approval.step_id}: ${r.pending_approval.message ?? ""}`);
  for (const s of r.steps) {
    const decision = s.decision ? safe` (${s.decision.decision} by ${s.decision.decided_by.key_name ?? s.decision.decided_by.key_id})` : "";
    const copied = s.copied_from ? safe` (copied from ${s.copied_from})` : "";
    lines.push(safe`  ${s.id}  ${s.type}  ${s.status}${s.error ? ` ${s.error}` : ""}` + decision + copied);
  }
  return lines.join("\n");
}

const runPath = (c: Ctx) => `/workflows/${seg(c.positionals[0])}/runs/${seg(c.positionals[1])}`;

/** POST …/runs/{id}/{action}, with `--comment` for approvals. */
const runAction = (action: string, summary: string, comment = false): Command => ({
  args: `WORKFLOW_ID RUN_ID${comment ? " [--comment TEXT]" : ""}`,
  summary,
  positionals: 2,
  ...(comment && { options: { comment: { type: "string" } } }),
  async run(c) {
    const text = optional(c, "comment");
    const { data } = await c.api().call("POST", `${runPath(c)}/${action}`, text === undefined ? undefined : { comment: text });
    c.out.line(data, describeRun(data));
  },
});

export const WORKFLOW_COMMANDS: Record<string, Command> = {
  "workflows list": {
    args: "[--limit N]",
    summary: "the workflows of the key's environment",
    options: { limit: { type: "string" } },
    async run(c) {
      const { data } = await c.api().call<any[]>("GET", `/workflows?limit=${limitOf(c)}`);
      const rows = data.map((w) => ({
        ...w,
        trigger: w.trigger.type === "event" ? w.trigger.event_type : w.trigger.type,
        steps: w.steps.length,
      }));
      if (c.out.json) for (const w of data) c.out.line(w);
      else c.out.line(data, table(rows, ["id", "name", "status", "trigger", "steps", "version"]));
    },
  },
  "workflows get": {
    args: "WORKFLOW_ID",
    summary: "one workflow's definition",
    positionals: 1,
    async run(c) {
      const { data } = await c.api().call("GET", `/workflows/${seg(c.positionals[0])}`);
      c.out.line(data);
    },
  },
  "workflows create": {
    args: "--file PATH | --definition JSON",
    summary: "create a workflow from its definition (name, trigger, steps); its secrets are printed once",
    options: { file: { type: "string" }, definition: { type: "string" } },
    async run(c) {
      const file = optional(c, "file");
      let body = jsonObject(c, "definition");
      if (file !== undefined) {
        try {
          body = JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>;
        } catch (err) {
          throw new UsageError(`--file: ${(err as Error).message}`);
        }
      }
      if (!body) throw new UsageError("--file or --definition is required");
      const api = c.api();
      const { data } = await api.call("POST", "/workflows", body);
      const lines = [safe`${data.id}  ${data.name}  v${data.version}`, safe`signing secret: ${data.signing_secret} (shown once)`];
      if (data.hook) lines.push(safe`hook: POST ${api.url}/hooks/${data.hook.id}`);
      if (data.hook_secret) lines.push(safe`hook secret: ${data.hook_secret} (shown once)`);
      if (data.next_run_at) lines.push(safe`next run: ${data.next_run_at}`);
      c.out.line(data, lines.join("\n"));
    },
  },
  "workflows run": {
    args: "WORKFLOW_ID [--input JSON]",
    summary: "start a run of a workflow with an input (a JSON object; default {})",
    options: { input: { type: "string" } },
    positionals: 1,
    async run(c) {
      const input = jsonObject(c, "input") ?? {};
      const { data } = await c.api().call("POST", `/workflows/${seg(c.positionals[0])}/runs`, { input });
      c.out.line(data, describeRun(data));
    },
  },
  "runs list": {
    args: "[--workflow WORKFLOW_ID] [--status STATUS] [--limit N]",
    summary: "runs of the key's environment, newest first",
    details: `STATUS is one of ${RUN_STATUSES.join(", ")}.`,
    options: { workflow: { type: "string" }, status: { type: "string" }, limit: { type: "string" } },
    async run(c) {
      const status = optional(c, "status");
      const workflow = optional(c, "workflow");
      if (status !== undefined && !RUN_STATUSES.includes(status))
        throw new UsageError(`--status must be one of ${RUN_STATUSES.join(", ")}`);
      const query = `limit=${limitOf(c)}${status ? `&status=${status}` : ""}${workflow ? `&workflow_id=${seg(workflow)}` : ""}`;
      const { data } = await c.api().call<any[]>("GET", `/runs?${query}`);
      if (c.out.json) for (const r of data) c.out.line(r);
      else
        c.out.line(
          data,
          table(
            data.map((r) => ({ ...r, status: statusOf(r) })),
            ["id", "workflow_id", "status", "created_at", "finished_at"],
          ),
        );
    },
  },
  "runs get": {
    args: "WORKFLOW_ID RUN_ID",
    summary: "one run: its status and each step's",
    positionals: 2,
    async run(c) {
      const { data } = await c.api().call("GET", runPath(c));
      c.out.line(data, describeRun(data));
    },
  },
  "runs retry": runAction("retry", "run a failed run again from its failed step"),
  "runs rerun": {
    args: "WORKFLOW_ID RUN_ID [--from-step STEP_ID] [--input JSON]",
    summary: "start a new run of a run that ended: from the start or from a step, with its input or a new one",
    details: "--from-step: the steps before it are not run again; their results are copied from the run (marked copied_from).",
    options: { "from-step": { type: "string" }, input: { type: "string" } },
    positionals: 2,
    async run(c) {
      const input = jsonObject(c, "input");
      const from = optional(c, "from-step");
      const body = { ...(from !== undefined && { from_step: from }), ...(input !== undefined && { input }) };
      const { data } = await c.api().call("POST", `${runPath(c)}/rerun`, Object.keys(body).length > 0 ? body : undefined);
      c.out.line(data, describeRun(data));
    },
  },
  "runs cancel": runAction("cancel", "cancel a run that has not finished"),
  approve: runAction("approve", "approve the approval step a run waits at", true),
  reject: runAction("reject", "reject the approval step a run waits at (the run fails)", true),
};
