import type { EventDoc } from "../../shared/records/events";
import type { Collection } from "../../shared/storage/types";
import type { RunDoc } from "../../services/workflows/run-doc";
import type { WaitDoc } from "../../services/workflows/wait-records";
import { waitFor } from "../../tools/procs";
import { usePlatform } from "../helpers/platform";
import { runsApi } from "../helpers/steps";

/**
 * The engine stores a wait's registration, then the write that parks its run. An event handled
 * between the two must not spend the registration: it is left marked for the sweep, and settles
 * the wait once the run is parked. Driven through the workflows service's own method on the real
 * store, with the run put back in the state between the two writes.
 */
const suite = usePlatform({ RATE_LIMIT_MAX: "100000", RUN_STARTS_PER_MINUTE: "100000" });
const acme = runsApi(
  () => suite.p.baseUrl,
  () => suite.acme.live,
);

interface WorkflowsInternals {
  runs: Collection<RunDoc>;
  waits: Collection<WaitDoc>;
  events: Collection<EventDoc>;
  resolveWaits(tenant: { org_id: string; environment: "live" }, events: EventDoc[]): Promise<Set<string>>;
}

it("an event meeting a registered wait whose run is not parked yet leaves it for a later pass, which settles it", async () => {
  const service = suite.p.broker.getLocalService("workflows") as unknown as WorkflowsInternals;
  const wf = await acme.workflow([
    { id: "pay", type: "wait_for_event", event_type: "payment.succeeded", match: { "data.order_id": "{{ input.order_id }}" } },
  ]);
  const runId = await acme.start(wf.id, { order_id: "arming" });
  const me = (await acme.call("GET", "/me")).body.data;
  const tenant = { org_id: me.org.id as string, environment: "live" as const };
  await waitFor("the run to wait", async () => (await service.runs.get(tenant, runId))?.status === "waiting");
  const parked = (await service.runs.get(tenant, runId))!;
  // As between the registration and the parking write: the step not yet waiting.
  const arming = await service.runs.update(
    tenant,
    { id: runId, rev: parked.rev },
    { $set: { status: "running", steps: parked.steps.map((s) => ({ ...s, status: "running" })) } },
  );
  expect(arming).not.toBeNull();
  const event = {
    id: "evt_01jarming0000000000000000",
    ...tenant,
    type: "payment.succeeded",
    data: { order_id: "arming" },
    source: "api",
    created_at: new Date().toISOString(),
  } as EventDoc;

  expect([...(await service.resolveWaits(tenant, [event]))]).toEqual([event.id]);
  expect(await service.waits.count(tenant, { run_id: runId })).toBe(1);
  expect((await service.runs.get(tenant, runId))!.status).toBe("running");

  // The parking write lands; the next pass settles the wait.
  await service.runs.update(tenant, { id: runId }, { $set: { status: "waiting", steps: parked.steps } });
  expect([...(await service.resolveWaits(tenant, [event]))]).toEqual([]);
  expect(await service.waits.count(tenant, { run_id: runId })).toBe(0);
  const run = await acme.ended(wf.id, runId);
  expect(run.status).toBe("succeeded");
  expect(run.steps[0].output).toMatchObject({ id: event.id, data: { order_id: "arming" } });
});

it("a run's registrations go when it ends: its cancel_on's, and a wait cancelled through the API", async () => {
  const service = suite.p.broker.getLocalService("workflows") as unknown as WorkflowsInternals;
  const me = (await acme.call("GET", "/me")).body.data;
  const tenant = { org_id: me.org.id as string, environment: "live" as const };
  const res = await acme.call("POST", "/workflows", {
    name: "both",
    trigger: { type: "manual" },
    cancel_on: [{ event_type: "order.cancelled", match: { "data.order_id": "{{ input.order_id }}" } }],
    steps: [{ id: "pay", type: "wait_for_event", event_type: "payment.succeeded", match: { "data.order_id": "{{ input.order_id }}" } }],
  });
  expect(res.status).toBe(201);
  const wf = res.body.data.id as string;
  const runId = await acme.start(wf, { order_id: "gone" });
  await waitFor("the run to wait", async () => (await service.runs.get(tenant, runId))?.status === "waiting");
  expect((await service.waits.find(tenant, { run_id: runId })).map((w) => w.kind).sort()).toEqual(["cancel", "wait"]);
  expect((await acme.call("POST", `/workflows/${wf}/runs/${runId}/cancel`)).status).toBe(200);
  await waitFor("its registrations to go", async () => (await service.waits.count(tenant, { run_id: runId })) === 0);
});
