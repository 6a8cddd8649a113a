import { setTimeout as sleep } from "node:timers/promises";
import { isSystemType } from "../../shared/records/events";
import type { Api } from "./http";

export type Triggered =
  | { fixture: false; event: { id: string; type: string } }
  | { fixture: true; type: string; note: string; key_id?: string; workflow_id?: string; run_id?: string; webhook_id?: string };

/** The name fixture keys, workflows and webhooks carry, so they are recognised in lists and the event log. */
export const FIXTURE_KEY_NAME = "cli trigger fixture";
const FIXTURE_NAME = FIXTURE_KEY_NAME;
/** How long a fixture waits for its run to reach the state it is for. */
const RUN_WAIT_MS = 30_000;

type Fixture = (api: Api) => Promise<Extract<Triggered, { fixture: true }>>;

/** A key holding the least there is, revoked at once: the fixture leaves no usable credential behind. */
const keyFixture: Fixture = async (api) => {
  const { data: key } = await api.call("POST", "/api-keys", { name: FIXTURE_KEY_NAME, scopes: ["events:read"] });
  await api.call("DELETE", `/api-keys/${key.id}`);
  return {
    fixture: true,
    type: "",
    key_id: key.id,
    note: `key ${key.id} '${FIXTURE_KEY_NAME}' created and revoked: api_key.created, api_key.revoked`,
  };
};

/** Polls a run until `done` holds (a state change the engine makes on its own time). */
async function runUntil(api: Api, wf: string, run: string, done: (r: any) => boolean): Promise<any> {
  const until = Date.now() + RUN_WAIT_MS;
  for (;;) {
    const { data } = await api.call("GET", `/workflows/${wf}/runs/${run}`);
    if (done(data)) return data;
    if (Date.now() > until) throw new Error(`run ${run} is still ${data.status} after ${RUN_WAIT_MS / 1000} s`);
    await sleep(100);
  }
}

/** A workflow made for the fixture, run, and deleted whatever happens in between. */
async function withWorkflow(api: Api, steps: unknown[], use: (wf: string, run: string) => Promise<string>) {
  const { data: wf } = await api.call("POST", "/workflows", { name: FIXTURE_NAME, trigger: { type: "manual" }, steps });
  let run = "";
  let said: string;
  try {
    ({
      data: { id: run },
    } = await api.call("POST", `/workflows/${wf.id}/runs`, { input: {} }));
    said = await use(wf.id, run);
  } finally {
    await api.call("DELETE", `/workflows/${wf.id}`);
  }
  return { workflow_id: wf.id as string, run_id: run, said };
}

/** A one-step run that succeeds: workflow.completed, then workflow.deleted as the fixture cleans up. */
const completedFixture: Fixture = async (api) => {
  const done = await withWorkflow(api, [{ id: "wait", type: "delay", duration_ms: 1 }], async (wf, run) => {
    const r = await runUntil(api, wf, run, (x) => ["succeeded", "failed", "cancelled"].includes(x.status));
    return r.status;
  });
  return {
    fixture: true,
    type: "",
    workflow_id: done.workflow_id,
    run_id: done.run_id,
    note: `workflow ${done.workflow_id} '${FIXTURE_NAME}' ran (${done.said}) and was deleted: workflow.completed, workflow.deleted`,
  };
};

/** A run waiting at an approval, rejected by the fixture: approval.requested, approval.decided, workflow.completed, workflow.deleted. */
const approvalFixture: Fixture = async (api) => {
  const steps = [{ id: "approve", type: "approval", message: "Approval asked by the CLI's trigger fixture" }];
  const done = await withWorkflow(api, steps, async (wf, run) => {
    await runUntil(api, wf, run, (x) => x.status === "waiting");
    await api.call("POST", `/workflows/${wf}/runs/${run}/reject`, { comment: FIXTURE_NAME });
    await runUntil(api, wf, run, (x) => x.status === "failed");
    return "rejected";
  });
  return {
    fixture: true,
    type: "",
    workflow_id: done.workflow_id,
    run_id: done.run_id,
    note: `workflow ${done.workflow_id} '${FIXTURE_NAME}' asked an approval, the fixture rejected it and deleted the workflow: approval.requested, approval.decided, workflow.completed, workflow.deleted`,
  };
};

/** A webhook on a type nothing emits, deleted at once: it never receives anything. */
const webhookFixture: Fixture = async (api) => {
  const { data: hook } = await api.call("POST", "/webhooks", {
    url: "https://example.com/cli-trigger-fixture",
    events: ["cli_fixture.never"],
    description: FIXTURE_NAME,
  });
  await api.call("DELETE", `/webhooks/${hook.id}`);
  return {
    fixture: true,
    type: "",
    webhook_id: hook.id,
    note: `webhook ${hook.id} '${FIXTURE_NAME}' created and deleted: webhook.deleted`,
  };
};

/** The system types a fixture can make happen through the public API. */
export const FIXTURES: Record<string, Fixture> = {
  "api_key.created": keyFixture,
  "api_key.revoked": keyFixture,
  "workflow.completed": completedFixture,
  "workflow.deleted": completedFixture,
  "approval.requested": approvalFixture,
  "approval.decided": approvalFixture,
  "webhook.deleted": webhookFixture,
};

/**
 * `trigger TYPE`: a client type is emitted (POST /events). Clients cannot emit system types; for
 * the ones an API call causes, the CLI makes that call instead (a fixture): answers null for the others.
 */
export async function triggerEvent(api: Api, type: string, data: Record<string, unknown>): Promise<Triggered | null> {
  if (!isSystemType(type)) {
    const { data: event } = await api.call("POST", "/events", { type, data });
    return { fixture: false, event };
  }
  const fixture = FIXTURES[type];
  return fixture ? { ...(await fixture(api)), type } : null;
}
