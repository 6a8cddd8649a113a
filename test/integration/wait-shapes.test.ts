import type { EventDoc } from "../../shared/records/events";
import type { Collection, Filter } from "../../shared/storage/types";
import { ShapeAbsence } from "../../services/workflows/shape-absence";
import type { RunDoc } from "../../services/workflows/run-doc";
import type { ShapeDoc } from "../../services/workflows/wait-records";
import { waitFor } from "../../tools/procs";
import { usePlatform } from "../helpers/platform";
import { runsApi } from "../helpers/steps";

/**
 * An event of a type no run waits on costs no read of the wait shapes while this node's answer that
 * none waits holds; a run that begins waiting on the type here drops that answer at once. Driven
 * through the workflows service's own method on the real store, the answer's age on a clock the
 * test moves. (Across nodes: test/cluster/waits-cluster.test.ts.)
 */
const suite = usePlatform({ RATE_LIMIT_MAX: "100000", RUN_STARTS_PER_MINUTE: "100000" });
const acme = runsApi(
  () => suite.p.baseUrl,
  () => suite.acme.live,
);

interface WorkflowsInternals {
  runs: Collection<RunDoc>;
  shapes: Collection<ShapeDoc>;
  shapeAbsence: ShapeAbsence;
  resolveWaits(tenant: { org_id: string; environment: "live" }, events: EventDoc[]): Promise<Set<string>>;
}

it("reads no shapes for a type nobody waits on until the answer lapses, and finds a wait begun on it at once", async () => {
  const service = suite.p.broker.getLocalService("workflows") as unknown as WorkflowsInternals;
  const me = (await acme.call("GET", "/me")).body.data;
  const tenant = { org_id: me.org.id as string, environment: "live" as const };
  let now = 0;
  service.shapeAbsence = new ShapeAbsence(() => now, 1000);
  const find = jest.spyOn(service.shapes, "find");
  // The reads of shapes for this test's type (the platform's own events are of other types).
  const reads = () => find.mock.calls.filter(([, filter]) => JSON.stringify((filter as Filter).event_type).includes("quiet.type")).length;
  let n = 0;
  const event = (order: string) =>
    ({
      id: `evt_01jquiet${String(n++).padStart(18, "0")}`,
      ...tenant,
      type: "quiet.type",
      data: { order_id: order },
      source: "api",
      created_at: new Date().toISOString(),
    }) as EventDoc;

  await service.resolveWaits(tenant, [event("nobody")]);
  expect(reads()).toBe(1);
  await service.resolveWaits(tenant, [event("nobody")]);
  expect(reads()).toBe(1);
  now += 1000;
  await service.resolveWaits(tenant, [event("nobody")]);
  expect(reads()).toBe(2);

  const wf = await acme.workflow([
    { id: "pay", type: "wait_for_event", event_type: "quiet.type", match: { "data.order_id": "{{ input.order_id }}" } },
  ]);
  const runId = await acme.start(wf.id, { order_id: "o-1" });
  await waitFor("the run to wait", async () => (await service.runs.get(tenant, runId))?.status === "waiting");
  // The answer that none waits is still within its time, but the wait began here: it was dropped.
  const met = event("o-1");
  expect([...(await service.resolveWaits(tenant, [met]))]).toEqual([]);
  expect(reads()).toBe(3);
  const run = await acme.ended(wf.id, runId);
  expect(run.steps[0].output).toMatchObject({ id: met.id, data: { order_id: "o-1" } });
  find.mockRestore();
});
