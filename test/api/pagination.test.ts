import fc from "fast-check";
import { api, usePlatform } from "../helpers/platform";

/**
 * Cursor paging under concurrent inserts, through HTTP: random interleavings of page reads
 * (random `limit`, forwards with `starting_after`, then backwards with `ending_before`) and inserts
 * (which land anywhere in the list's order). Whatever the interleaving, every item that existed
 * when the walk began is read exactly once, in the list's order, and no item is read twice.
 */
const suite = usePlatform({ RATE_LIMIT_MAX: "1000000" });
const call = (method: string, path: string, body?: unknown) => api(suite.p.baseUrl, method, path, { key: suite.acme.live, body });

interface Item {
  id?: string;
  type?: string;
}

interface ListUnderTest {
  name: string;
  /** The list's path, with its query so far (`?` or `&` follows). */
  path: (run: number) => string;
  /** Inserts one item (its key made from `seed`, where the list orders by a chosen key) and answers the key. */
  insert: (run: number, seed: string) => Promise<string>;
  keyOf: (item: Item) => string;
  /** Whether `a` comes before `b` in the list. */
  before: (a: string, b: string, systemTypes: string[]) => boolean;
}

let counter = 0;
let runsWorkflow = "";
const runsFrom: Record<number, string> = {};
beforeAll(async () => {
  const wf = await call("POST", "/workflows", { name: "paged runs", trigger: { type: "manual" }, steps: [{ type: "approval" }] });
  runsWorkflow = wf.body.data.id;
});
const newestFirst = (a: string, b: string) => a > b;

const LISTS: ListUnderTest[] = [
  {
    name: "GET /events?type= (newest first by id)",
    path: (run) => `/events?type=paging.r${run}&`,
    insert: async (run) => (await call("POST", "/events", { type: `paging.r${run}`, data: {} })).body.data.id,
    keyOf: (item) => item.id!,
    before: newestFirst,
  },
  {
    name: "GET /workflows (newest first by id)",
    path: () => "/workflows?",
    insert: async (_run, seed) =>
      (
        await call("POST", "/workflows", {
          name: `w ${seed}`,
          trigger: { type: "manual" },
          steps: [{ id: "d", type: "delay", duration_ms: 1 }],
        })
      ).body.data.id,
    keyOf: (item) => item.id!,
    before: newestFirst,
  },
  {
    name: "GET /runs?workflow_id=&created_after= (newest first by id)",
    path: (run) => {
      // One workflow's runs (each waits for its approval), from this property run's start.
      runsFrom[run] = new Date().toISOString();
      return `/runs?workflow_id=${runsWorkflow}&created_after=${encodeURIComponent(runsFrom[run])}&`;
    },
    insert: async () => (await call("POST", `/workflows/${runsWorkflow}/runs`, { input: {} })).body.data.id,
    keyOf: (item) => item.id!,
    before: newestFirst,
  },
  {
    name: "GET /events/types (system types, then custom ones by name)",
    path: () => "/events/types?",
    // A random name: the new type lands before or after the cursor.
    insert: async (_run, seed) => {
      const type = `t${seed}.x${(counter += 1)}`;
      expect((await call("POST", "/events", { type })).status).toBe(201);
      return type;
    },
    keyOf: (item) => item.type!,
    before: (a, b, system) => {
      const [ia, ib] = [system.indexOf(a), system.indexOf(b)];
      if (ia >= 0 || ib >= 0) return ia >= 0 && (ib < 0 || ia < ib);
      return a < b;
    },
  },
];

type Op = { kind: "read"; limit: number } | { kind: "insert"; seeds: string[] };
const seed = fc.stringMatching(/^[a-z]{1,6}$/);
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant("read" as const), limit: fc.integer({ min: 1, max: 4 }) }),
  fc.record({ kind: fc.constant("insert" as const), seeds: fc.array(seed, { minLength: 1, maxLength: 2 }) }),
);

async function page(path: string, limit: number, cursor: string): Promise<{ items: Item[]; hasMore: boolean }> {
  const res = await call("GET", `${path}limit=${limit}${cursor}`);
  expect(res.status).toBe(200);
  expect(res.body.object).toBe("list");
  expect(res.body.meta).toMatchObject({ limit, has_more: expect.any(Boolean) });
  return { items: res.body.data, hasMore: res.body.meta.has_more };
}

let run = 0;
describe.each(LISTS)("$name by cursor", (list) => {
  it("reads every item that existed once and in order, whatever is inserted between the reads", async () => {
    const system = ((await call("GET", "/events/types?limit=100")).body.data as { type: string; system: boolean }[])
      .filter((t) => t.system)
      .map((t) => t.type);
    const cursorTo = (direction: string, key: string) => `&${direction}=${encodeURIComponent(key)}`;

    /** Pages in one direction from `from`, doing `ops` in turn (then reading 4 at a time): the keys read, in list order. */
    const walk = async (path: string, ops: Op[], direction: "starting_after" | "ending_before", from?: string): Promise<string[]> => {
      const seen: string[] = [];
      let cursor = from === undefined ? "" : cursorTo(direction, from);
      for (let i = 0; ; i += 1) {
        const step: Op = ops[i] ?? { kind: "read", limit: 4 };
        if (step.kind === "insert") {
          for (const s of step.seeds) await list.insert(run, s);
          continue;
        }
        const read = await page(path, step.limit, cursor);
        const keys = read.items.map(list.keyOf);
        const more = read.hasMore;
        if (direction === "starting_after") seen.push(...keys);
        else seen.unshift(...keys);
        if (keys.length === 0) return seen;
        cursor = cursorTo(direction, direction === "starting_after" ? keys[keys.length - 1] : keys[0]);
        if (!more && i >= ops.length) return seen;
      }
    };

    await fc.assert(
      fc.asyncProperty(fc.array(seed, { maxLength: 6 }), fc.array(op, { minLength: 1, maxLength: 8 }), async (initial, ops) => {
        run += 1;
        const path = list.path(run);
        for (const s of initial) await list.insert(run, s);
        // Everything in the list now (whoever put it there) must be read exactly once each way.
        const everything: string[] = [];
        for (let cursor = "", more = true; more;) {
          const p = await page(path, 100, cursor);
          everything.push(...p.items.map(list.keyOf));
          more = p.hasMore;
          cursor = cursorTo("starting_after", everything[everything.length - 1]);
        }
        // What was just inserted is there (the walk below has something to prove).
        expect(everything.length).toBeGreaterThanOrEqual(initial.length);
        const last = everything[everything.length - 1];
        const forward = await walk(path, ops, "starting_after");
        // Backwards from the last item: every other item, the newest inserts included at the front.
        const backward = last === undefined ? [] : [...(await walk(path, ops, "ending_before", last)), last];
        for (const seen of [forward, backward]) {
          expect(new Set(seen).size).toBe(seen.length);
          expect(seen).toEqual(expect.arrayContaining(everything));
          for (let k = 1; k < seen.length; k += 1)
            expect([seen[k - 1], seen[k], list.before(seen[k - 1], seen[k], system)]).toEqual([seen[k - 1], seen[k], true]);
        }
      }),
      { numRuns: 8 },
    );
  }, 120_000);
});

describe("offset paging (page, per_page), as the spec fixes it", () => {
  it("drifts under inserts, which is why lists also page by cursor", async () => {
    const type = "paging.offset";
    for (let i = 0; i < 3; i += 1) await call("POST", "/events", { type });
    const page1 = (await call("GET", `/events?type=${type}&page=1&per_page=2`)).body;
    expect(page1).toMatchObject({ object: "list", meta: { page: 1, per_page: 2, total: 3 } });
    await call("POST", "/events", { type });
    const page2 = (await call("GET", `/events?type=${type}&page=2&per_page=2`)).body;
    // The newest item pushed page 1's last item onto page 2: read twice.
    expect(page2.data[0].id).toBe(page1.data[1].id);
    const byCursor = (await call("GET", `/events?type=${type}&limit=2&starting_after=${page1.data[1].id}`)).body;
    expect(byCursor.data.map((e: Item) => e.id)).not.toContain(page1.data[1].id);
  });

  it("lists the environments and event types by page or by cursor", async () => {
    const envs = (await call("GET", `/orgs/${suite.acme.org.id}/environments?limit=1`)).body;
    expect(envs).toMatchObject({
      object: "list",
      data: [{ object: "environment", id: "live" }],
      meta: { limit: 1, has_more: true, total: 2 },
    });
    const next = (await call("GET", `/orgs/${suite.acme.org.id}/environments?limit=1&starting_after=live`)).body;
    expect(next).toMatchObject({ data: [{ id: "test" }], meta: { has_more: false } });
    const back = (await call("GET", `/orgs/${suite.acme.org.id}/environments?ending_before=test`)).body;
    expect(back.data.map((e: Item) => e.id)).toEqual(["live"]);
    const types = (await call("GET", "/events/types?page=1&per_page=2")).body;
    expect(types).toMatchObject({
      object: "list",
      data: [{ object: "event_type" }, { object: "event_type" }],
      meta: { page: 1, per_page: 2 },
    });
  });
});
