import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ChildRuns } from "../../services/workflows/child-runs";
import { fanChild, type FanOutProgress } from "../../services/workflows/fan-out.logic";
import type { RunDoc } from "../../services/workflows/run-doc";
import { newRun } from "../../services/workflows/runs.logic";
import type { Step, WorkflowDoc } from "../../services/workflows/workflows.logic";
import { STORE } from "../../services/workflows/workflows.store";
import { SqliteStore } from "../../shared/storage/sqlite";
import { openCollection, type Collection } from "../../shared/storage/types";

/**
 * A map's drives against a real store, as they overlap when its children end (each end takes the
 * parent's claim): the drive holding the claim, starting from counters stored long before, goes past
 * the children already stored in one read instead of one refused insert each; a drive whose claim
 * was taken stops at the first child it finds stored (decision 0186). Only the run-start budgets
 * are left out: each child is inserted into the real collection, its unique key refusing a second.
 */
const N = 1000;
const MAP: Step = {
  id: "each",
  type: "map",
  items: "{{ input.items }}",
  max_concurrency: 10,
  tolerated_failures: 0,
  steps: [{ id: "out", type: "set", output: "{{ input.item }}" }],
};
const WORKFLOW = {
  id: "wf_1",
  org_id: "org_1",
  environment: "live",
  name: "w",
  description: null,
  status: "active",
  trigger: { type: "manual" },
  steps: [MAP],
  version: 1,
  created_at: new Date().toISOString(),
  updated_at: new Date().toISOString(),
} as unknown as WorkflowDoc;

let dir: string;
let store: SqliteStore;
let runs: Collection<RunDoc>;
/** The index of each child a drive tried to store, in order. */
const tried: number[] = [];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "wfp-fan-"));
  store = new SqliteStore(dir);
  runs = openCollection(store, STORE.owns.runs);
});

afterAll(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

const family = new ChildRuns({
  get runs() {
    return runs;
  },
  workflows: { get: () => Promise.resolve(null) } as never,
  startsBudget: (_tenant, now) => ({ id: "starts", limit: Number.MAX_SAFE_INTEGER, expiresAt: now + 60_000 }),
  now: () => Date.now(),
  startCounted: async (_tenant, _budgets, run) => {
    tried.push(run.parent?.index ?? -1);
    await runs.insert(run);
    return null;
  },
  descendantsMax: 10_000,
  budgetTtlMs: 60_000,
  wake: () => undefined,
});

describe("a map's overlapping drives", () => {
  it("the claim holder goes past 400 stored children at once; an overtaken drive stops at the first", async () => {
    const now = Date.now();
    const items = Array.from({ length: N }, (_, n) => n);
    const fresh = newRun(WORKFLOW, { items }, { type: "manual" }, now);
    // Waiting on its children, its counters stored when none had started: drives since were overtaken before storing theirs.
    const shown: FanOutProgress = { count: N, started: 0, running: 0, succeeded: 0, failed: 0 };
    const parent: RunDoc = {
      ...fresh,
      status: "waiting",
      lease: "L1",
      steps: fresh.steps.map((s) => ({ ...s, status: "waiting", output: { ...shown } })),
    };
    await runs.insert(parent);
    for (let i = 0; i < 400; i += 1)
      await runs.insert({ ...fanChild(parent, MAP as never, i, { item: i, index: i }, now), status: "succeeded" });
    const clock = { now, leaseMarginMs: 5_000 };

    const write = await family.step(parent, clock);
    // One child found stored, then the next ten started: not 400 refused inserts first.
    expect(tried).toEqual([0, ...Array.from({ length: 10 }, (_, n) => 400 + n)]);
    expect(write.set.steps?.[0].output).toMatchObject({ started: 410, running: 10, succeeded: 400 });

    // Those ten end, and an end takes the claim: a drive still going from the old counters stops at once.
    const tenant = { org_id: "org_1", environment: "live" } as const;
    for (const child of await runs.find(tenant, { "parent.run_id": parent.id, status: "queued" }, { limit: 100 }))
      await runs.update(tenant, { id: child.id }, { $set: { status: "succeeded" } });
    await runs.update(tenant, { id: parent.id }, { $set: { lease: "L2" } });
    tried.length = 0;
    await family.step(parent, clock);
    expect(tried).toEqual([0]);
    expect(await runs.count(tenant, { "parent.run_id": parent.id })).toBe(410);
  });
});
