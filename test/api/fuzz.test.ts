import { randomBytes } from "node:crypto";
import fc from "fast-check";
import { ROUTES, type RouteDef } from "../../services/gateway/routes";
import { brokenOf, valueOf, type Generation } from "../helpers/arbitraries";
import { DOCUMENT } from "../helpers/contract";
import { api, usePlatform, type ApiResponse } from "../helpers/platform";
import { startReceiver, type Receiver } from "../helpers/receiver";
import { waitFor } from "../../tools/procs";

/**
 * Requests generated from the API reference for every operation, against a running platform, in
 * the order a client meets them (create, read, act, update, delete) with the ids the creations
 * answered. Every answer is checked against the document by `api()` itself; here: no 5xx, a body
 * the document allows is accepted (2xx), a body that breaks one of its rules is refused with 400.
 * Private targets are allowed so that webhooks and http steps point at a local receiver.
 */
const suite = usePlatform({
  WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
  RATE_LIMIT_MAX: "100000",
  SECRETS_KEYS: `k1:${randomBytes(32).toString("base64")}`,
});
let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(() => receiver?.close());

const RUNS = 60;
const schemas = DOCUMENT.components.schemas as Record<string, any>;
/** Ids the creations answered, by the path parameter they fill. */
const pools: Record<string, string[][]> = {
  Workflow: [],
  Run: [],
  Webhook: [],
  Delivery: [],
  ApiKey: [],
  Member: [],
  Event: [],
  Secret: [],
  Recovery: [],
  BulkJob: [],
  /** Workflows whose hook has a secret the platform made, to rotate. */
  Hook: [],
  /** Runs waiting for an approval, made before approve and reject are tried. */
  Waiting: [],
  /** Failed runs, to retry, and others to rerun: among every run stored, they would rarely pick an ended one. */
  Failed: [],
  Ended: [],
  /** Active workflows with an hourly schedule, made before the schedule's routes are tried. */
  Scheduled: [],
};
const ABSENT = (prefix: string) => `${prefix}_0000000000000000000000zzzz`;

/** Which pool fills a route's path, and the prefix of its ids. */
function pathIds(route: RouteDef): { pool?: string; prefix: string } {
  if (route.path.startsWith("/orgs/{id}/members/")) return { pool: "Member", prefix: "mem" };
  if (route.path.startsWith("/orgs/")) return { prefix: "org" };
  if (route.path.startsWith("/api-keys/")) return { pool: "ApiKey", prefix: "key" };
  if (route.path.startsWith("/events/")) return { pool: "Event", prefix: "evt" };
  if (route.path.startsWith("/secrets/")) return { pool: "Secret", prefix: "sec" };
  if (route.path.startsWith("/runs/bulk/")) return { pool: "BulkJob", prefix: "blk" };
  if (route.path.includes("{job_id}")) return { pool: "Recovery", prefix: "rcv" };
  if (/approveRun|rejectRun/.test(route.action)) return { pool: "Waiting", prefix: "run" };
  if (route.action === "workflows.retryRun") return { pool: "Failed", prefix: "run" };
  if (route.action === "workflows.rerunRun") return { pool: "Ended", prefix: "run" };
  if (/Schedule$/.test(route.action)) return { pool: "Scheduled", prefix: "wf" };
  if (route.action === "workflows.rotateHookSecret") return { pool: "Hook", prefix: "wf" };
  if (route.path.includes("{run_id}")) return { pool: "Run", prefix: "run" };
  if (route.path.startsWith("/workflows/")) return { pool: "Workflow", prefix: "wf" };
  if (route.path.includes("{delivery_id}")) return { pool: "Delivery", prefix: "del" };
  if (route.path.startsWith("/webhooks/")) return { pool: "Webhook", prefix: "wh" };
  return { prefix: "ls" };
}

/** Operations whose answer depends on the resource's state: a valid request may meet 409 invalid_state. */
const STATEFUL =
  /\.(startRun|cancelRun|approveRun|rejectRun|retryRun|rerunRun|redeliver|retry|test|recover|updateMember|removeMember|rotateHookSecret|startBulk|cancelBulk)$/;

const ORDER = ["POST", "GET", "PATCH", "DELETE"];
// An inbound hook takes no API key and any body: test/api/hooks.test.ts generates its requests.
const operations = ROUTES.filter((r) => !r.stream && !r.inbound)
  .map((route) => ({ route, op: DOCUMENT.paths[route.path][route.method.toLowerCase()] }))
  .sort(
    (a, b) =>
      ORDER.indexOf(a.route.method) - ORDER.indexOf(b.route.method) ||
      // Creations of parents before children: workflows before runs, webhooks before their deliveries.
      a.route.path.split("/").length - b.route.path.split("/").length,
  );

const pastTime = fc.integer({ min: 0, max: 300 }).map((days) => new Date(Date.now() - days * 86_400_000).toISOString());
const futureTime = fc.integer({ min: 1, max: 300 }).map((days) => new Date(Date.now() + days * 86_400_000).toISOString());

function generation(): Generation {
  return {
    schemas,
    // Map and parallel steps hold lists of steps (a schema that refers to itself): two levels of them at most.
    nested: new Set(["MapStepInput", "ParallelStepInput", "MapStep", "ParallelStep"]),
    maxNesting: 2,
    fixed: {
      url: fc.stringMatching(/^[a-z]{1,10}$/).map((p) => receiver.url(`/fuzz/${p}`)),
      // Flow control's keys are templates over the input, a rule the schema does not state.
      key: fc.constantFrom("{{ input.customer_id }}", "{{ input.n }}"),
      // Pages within the depth a page may reach (page × per_page ≤ 10,000).
      page: fc.integer({ min: 1, max: 100 }),
      // Times: in the past (ranges' starts) or the future (their ends), so a range is never empty by construction.
      since: pastTime,
      created_after: pastTime,
      until: futureTime,
      created_before: futureTime,
      // CEL conditions (a step's if, a trigger's filter): no schema states CEL's grammar.
      if: fc.constantFrom("true", "{{ has(input.a) }}", "size(run.id) > 0"),
      filter: fc.constantFrom("true", "event.data.amount >= 500", "{{ event.type.startsWith('order') }}"),
      // Schedules: no schema states cron's grammar or the list of time zones.
      cron: fc.constantFrom("0 8 * * 1-5", "*/15 * * * *", "30 2 * * *", "0 0 1 * *"),
      timezone: fc.constantFrom("UTC", "Europe/Berlin", "America/New_York"),
      // Ranges ending in the last minute and starting up to an hour before (a backfill's may not end after now).
      from: fc.integer({ min: 2, max: 60 }).map((m) => new Date(Date.now() - m * 60_000).toISOString()),
      to: fc.integer({ min: 1, max: 60 }).map((s) => new Date(Date.now() - s * 1000).toISOString()),
      // A run_workflow step's target must exist in the environment, or be a template, checked when the run gets there.
      workflow_id: fc.constantFrom("{{ workflow.id }}", "{{ input.target }}"),
      // A run_workflow step's timeout_ms needs wait: true, a rule the schema does not state.
      wait: fc.constant(true),
    },
  };
}

interface Request {
  path: string;
  query: string;
  body?: Record<string, unknown>;
  absent: boolean;
}

/**
 * A path with its ids (known ones mostly, read from the pools when the request is sent since
 * deletions shrink them; sometimes one that does not exist) and a query from the parameters.
 */
function requestOf(route: RouteDef, op: any, g: Generation): fc.Arbitrary<() => Request> {
  const query = (op.parameters ?? []).filter(
    (p: any) => p.in === "query" && !["starting_after", "ending_before", "from", "to"].includes(p.name),
  );
  const queryArb = fc.record(Object.fromEntries(query.map((p: any) => [p.name, valueOf(p.schema, g, p.name)])), { requiredKeys: [] });
  return fc.tuple(fc.nat(), fc.integer({ min: 0, max: 5 }), queryArb).map(([pick, odds, q]) => () => {
    const ids = pathIds(route);
    const known = ids.pool ? pools[ids.pool] : route.path.startsWith("/orgs/") ? [[suite.acme.org.id]] : [];
    const absent = known.length === 0 || odds === 0;
    const filled = absent
      ? ids.prefix === "run"
        ? [pools.Workflow[0]?.[0] ?? ABSENT("wf"), ABSENT("run")]
        : [ABSENT(ids.prefix), ABSENT("del")]
      : known[pick % known.length];
    let i = 0;
    // A workflow's version: its first always exists, its 999th never (a number, not an id from a pool).
    const path = route.path.replace(/\{(\w+)\}/g, (_m, name: string) => (name === "version" ? (absent ? "999" : "1") : filled[i++]));
    const params = { ...(q as Record<string, unknown>) };
    // A list pages either by number or by cursor.
    if (params.limit !== undefined) {
      delete params.page;
      delete params.per_page;
    }
    // Filters the document says go one at a time (x-exclusive-query): the first one drawn stays.
    const exclusive: string[] = op["x-exclusive-query"] ?? [];
    for (const name of exclusive.filter((n) => params[n] !== undefined).slice(1)) delete params[name];
    // A parameter taken only with another (x-requires-query) goes when the other was not drawn.
    const requires: Record<string, string> = op["x-requires-query"] ?? {};
    for (const [name, needed] of Object.entries(requires)) if (params[needed] === undefined) delete params[name];
    const search = new URLSearchParams(Object.entries(params).map(([k, v]) => [k, String(v)])).toString();
    return { path, query: search ? `?${search}` : "", absent };
  });
}

function remember(route: RouteDef, path: string, res: ApiResponse): void {
  const data = res.body?.data;
  const parent = path.split("/")[2];
  // A key made for the test environment is not the live caller's to read.
  if (route.action === "workflows.createSecret" && res.status === 201) pools.Secret.push([data.name]);
  if (route.action === "workflows.create" && data?.hook_secret) pools.Hook.push([data.id]);
  if (route.action === "webhooks.recover" && res.status === 202) pools.Recovery.push([parent, data.id]);
  if (route.action === "workflows.startBulk" && res.status === 202) pools.BulkJob.push([data.id]);
  if (route.method === "POST" && res.status === 201 && data?.id && (data.environment ?? "live") === "live") {
    const pool = { Run: "Run", Member: "Member" }[route.resource as string] ?? route.resource?.replace(/WithSecret|^New/g, "");
    if (pool && pools[pool]) pools[pool].push(pool === "Run" || pool === "Member" ? [parent, data.id] : [data.id]);
  }
  if (route.action === "webhooks.deliveries" && Array.isArray(data)) for (const d of data) pools.Delivery.push([parent, d.id]);
  if (route.method === "DELETE" && res.status === 200) {
    const gone = data.object === "secret" ? data.name : data.id;
    for (const pool of Object.values(pools)) for (let i = pool.length - 1; i >= 0; i--) if (pool[i].includes(gone)) pool.splice(i, 1);
  }
}

/**
 * A workflow's step ids are unique: a rule of the request no JSON Schema states, so a generated
 * body that repeats one gets a suffix on the later ones (a repeated id is refused by its own test).
 * The same holds in each list of steps of a map or parallel step, where the rules of map steps the
 * schema does not state are kept too (`fanOutRules`).
 */
function uniqueStepIds(body: Record<string, unknown>): Record<string, unknown> {
  if (!Array.isArray(body?.steps)) return body;
  return { ...body, steps: uniqueIn(body.steps) };
}
function uniqueIn(list: unknown[]): unknown[] {
  const seen = new Set<unknown>();
  return list.map((step: unknown, i: number) => {
    if (typeof step !== "object" || step === null) return step;
    const inner = fanOutRules(step as Record<string, unknown>);
    if (!("id" in inner)) return inner;
    const id = inner.id;
    const unique = seen.has(id) ? `${String(id).slice(0, 45)}_${i}` : id;
    seen.add(unique);
    return { ...inner, id: unique };
  });
}

/**
 * A map step takes either `steps` or `workflow_id` (steps kept when both were drawn), and `items`
 * that is a template or a list: rules of the logic no schema states. A map's workflow_id is one a
 * run fails to find (`{{ input.target }}`), so a generated workflow never starts runs of itself.
 */
function fanOutRules(step: Record<string, unknown>): Record<string, unknown> {
  if (step.type === "parallel" && typeof step.branches === "object" && step.branches !== null) {
    const branches = Object.entries(step.branches).map(([name, list]) => [name, Array.isArray(list) ? uniqueIn(list) : list]);
    return { ...step, branches: Object.fromEntries(branches) };
  }
  if (step.type !== "map") return step;
  const { workflow_id: _target, steps, ...rest } = step;
  const items = typeof rest.items === "string" ? "{{ input.orders }}" : rest.items;
  return Array.isArray(steps) ? { ...rest, items, steps: uniqueIn(steps) } : { ...rest, items, workflow_id: "{{ input.target }}" };
}

/**
 * POST /runs/bulk: a filter its action applies to. The fixed `filter` above is a CEL condition, and
 * the rules the schema does not state (a status per action, a workflow or a time range) are the logic's.
 */
function bulkFilter(body: Record<string, unknown>): Record<string, unknown> {
  const statuses: Record<string, string> = { retry: "failed", rerun: "succeeded", cancel: "waiting" };
  if (typeof body?.action !== "string" || !(body.action in statuses) || !("filter" in body)) return body;
  return { action: body.action, filter: { status: statuses[body.action], created_after: new Date(Date.now() - 86_400_000).toISOString() } };
}

/** A webhook trigger's filter reads `request`, not `event`: a CEL rule no schema states. */
function requestFilter(body: Record<string, unknown>): Record<string, unknown> {
  const trigger = body?.trigger as { type?: unknown; filter?: unknown } | undefined;
  if (trigger?.type !== "webhook" || typeof trigger.filter !== "string") return body;
  return { ...body, trigger: { ...trigger, filter: trigger.filter.replace(/event\.data|event/g, "request.body") } };
}

/** The map and parallel steps of a workflow's body, as `<type>@<level>` (0: its own steps). */
function fanOutKinds(body: unknown, level = 0): string[] {
  const steps = (body as { steps?: unknown })?.steps;
  if (!Array.isArray(steps)) return [];
  return steps.flatMap((step: any) => {
    if (step?.type === "map") return [`map@${level}`, ...fanOutKinds(step, level + 1)];
    if (step?.type === "parallel" && typeof step.branches === "object" && step.branches !== null)
      return [`parallel@${level}`, ...Object.values(step.branches).flatMap((list) => fanOutKinds({ steps: list }, level + 1))];
    return [];
  });
}

/** `n` runs of a new workflow of these steps, once each has reached `status`: [workflow id, run id] each. */
async function runsIn(n: number, status: "waiting" | "failed", name: string, steps: unknown[]): Promise<string[][]> {
  const key = suite.acme.live;
  const wf = await api(suite.p.baseUrl, "POST", "/workflows", { key, body: { name, trigger: { type: "manual" }, steps } });
  const runs: string[][] = [];
  for (let i = 0; i < n; i++) {
    const run = await api(suite.p.baseUrl, "POST", `/workflows/${wf.body.data.id}/runs`, { key, body: {} });
    runs.push([wf.body.data.id, run.body.data.id]);
  }
  await waitFor(`the runs to be ${status}`, async () => {
    const list = await api(suite.p.baseUrl, "GET", `/workflows/${wf.body.data.id}/runs?status=${status}`, { key });
    return list.body.data.length === n;
  });
  return runs;
}

/** Active workflows ticking every hour (a backfill of up to an hour holds at most one tick): [workflow id] each. */
async function scheduledWorkflows(n: number): Promise<string[][]> {
  const made: string[][] = [];
  for (let i = 0; i < n; i++) {
    const body = { name: "hourly", trigger: { type: "schedule", every_ms: 3_600_000 }, steps: [{ type: "approval" }] };
    made.push([(await api(suite.p.baseUrl, "POST", "/workflows", { key: suite.acme.live, body })).body.data.id]);
  }
  return made;
}

/**
 * A bulk cancel of 150 waiting runs, still running when answered (three batches with pauses
 * between them), for POST /runs/bulk/{job_id}/cancel; started once no other job of the
 * environment runs.
 */
async function runningBulkJob(): Promise<string[][]> {
  const key = suite.acme.live;
  const call = (method: string, path: string, body?: unknown) => api(suite.p.baseUrl, method, path, { key, body });
  const wf = (await call("POST", "/workflows", { name: "bulk", trigger: { type: "manual" }, steps: [{ type: "approval" }] })).body.data.id;
  for (let i = 0; i < 150; i += 25) await Promise.all(Array.from({ length: 25 }, () => call("POST", `/workflows/${wf}/runs`, {})));
  await waitFor(
    "150 runs waiting",
    async () => (await call("GET", `/workflows/${wf}/runs?status=waiting&per_page=1`)).body.meta.total === 150,
  );
  let id = "";
  await waitFor("a bulk job started (one runs at a time)", async () => {
    const res = await call("POST", "/runs/bulk", { action: "cancel", filter: { workflow_id: wf } });
    id = res.body.data?.id;
    return res.status === 202;
  });
  return [[id]];
}

/** A workflow with a map and a parallel at its top, and each inside one of them. */
const NESTED_FAN_OUT = {
  name: "nested fan-out",
  trigger: { type: "manual" },
  steps: [
    {
      id: "fan",
      type: "parallel",
      branches: {
        a: [{ id: "each", type: "map", items: "{{ input.items }}", steps: [{ id: "one", type: "set", output: 1 }] }],
        b: [{ id: "both", type: "parallel", branches: { x: [{ id: "two", type: "set", output: 2 }] } }],
      },
    },
    {
      id: "outer",
      type: "map",
      items: "{{ input.items }}",
      steps: [{ id: "inner", type: "map", items: "{{ input.items }}", steps: [{ id: "three", type: "set", output: 3 }] }],
    },
  ],
};

/** Runs of a one-approval workflow, once each waits for its approval. */
const waitingRuns = (n: number) => runsIn(n, "waiting", "approve", [{ type: "approval" }]);

/** Failed runs (an http step its target refuses, no retries), to retry. */
function failedRuns(n: number): Promise<string[][]> {
  receiver.behave("/refuse", () => ({ status: 500 }));
  return runsIn(n, "failed", "fails", [{ type: "http", url: receiver.url("/refuse"), retries: 0 }]);
}

/**
 * Each operation is a test of its own, in order (creations before the reads and changes of what
 * they made), each with its own time limit: a busy machine slows each a little, rather than one test
 * of every operation past its limit.
 */
describe("requests generated from the API reference, against a running server", () => {
  let g: Generation;
  const seen: Record<string, Set<number>> = {};
  const refusedBroken = new Set<string>();
  /** Map and parallel steps in workflows created, at which level (`map@0`: a workflow's own steps). */
  const createdWith = new Set<string>();
  beforeAll(() => {
    g = generation();
  });
  for (const { route, op } of operations) {
    it(`answers ${route.method} ${route.path} as documented: valid requests accepted, broken bodies refused with 400, never a 5xx`, async () => {
      if (/approveRun|rejectRun/.test(route.action)) pools.Waiting = await waitingRuns(3);
      if (route.action === "workflows.retryRun") pools.Failed = await failedRuns(3);
      if (route.action === "workflows.rerunRun") pools.Ended = await failedRuns(3);
      if (/Schedule$/.test(route.action)) pools.Scheduled = await scheduledWorkflows(3);
      // Runs that can be cancelled whatever the generated ones did meanwhile: waiting for an approval.
      if (route.action === "workflows.cancelRun") pools.Run.push(...(await waitingRuns(3)));
      if (route.action === "workflows.cancelBulk") pools.BulkJob = await runningBulkJob();
      const label = `${route.method} ${route.path}`;
      seen[label] = new Set();
      const bodySchema = op.requestBody?.content["application/json"].schema;
      const bodyArb = bodySchema
        ? (valueOf(bodySchema, g) as fc.Arbitrary<Record<string, unknown>>).map(uniqueStepIds).map(requestFilter).map(bulkFilter)
        : fc.constant(undefined);
      await fc.assert(
        fc.asyncProperty(requestOf(route, op, g), bodyArb, fc.boolean(), async (request, body, breakIt) => {
          const req = request();
          const key = suite.acme.live;
          const broken = breakIt && body !== undefined ? fc.sample(brokenOf(bodySchema, g, body), 1)[0] : undefined;
          const sent = broken?.body ?? body;
          const res = await api(suite.p.baseUrl, route.method, `${req.path}${req.query}`, { key, body: sent });
          seen[label].add(res.status);
          const what = `${label} ${req.path}${req.query} ${JSON.stringify(sent)?.slice(0, 300)} → ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`;
          expect({ what, server_error: res.status >= 500 }).toEqual({ what, server_error: false });
          if (broken) {
            // On a missing resource, 404 may come first: rules checked in the logic run after the lookup.
            const refused = res.status === 400 || (req.absent && res.status === 404);
            expect({ what, how: broken.how, refused }).toEqual({ what, how: broken.how, refused: true });
            if (res.status === 400) refusedBroken.add(label);
            return;
          }
          const allowed = [route.status ?? 200];
          if (req.absent || route.path.startsWith("/listen/")) allowed.push(404);
          if (STATEFUL.test(route.action)) allowed.push(409);
          // A count quota (50 webhooks per environment, …) depends on what is stored, not on the request.
          const quota = res.status === 400 && res.body.error.code === "quota_exceeded";
          // A test event's type must be one the webhook (generated too) subscribes to: a rule of its state, not of the request.
          const unsubscribed = route.action === "webhooks.test" && res.status === 400 && /does not subscribe/.test(res.body.error.message);
          // Generated emails repeat (fast-check shrinks towards the same few): a second one is already a member.
          const member = route.action === "orgs.addMember" && res.status === 409 && res.body.error.code === "resource_exists";
          expect({ what, ok: allowed.includes(res.status) || quota || unsubscribed || member }).toEqual({ what, ok: true });
          remember(route, req.path, res);
          if (route.action === "workflows.create" && res.status === 201) for (const kind of fanOutKinds(sent)) createdWith.add(kind);
        }),
        {
          numRuns: RUNS,
          endOnFailure: true,
          // Map and parallel steps inside one another are rare among generated workflows: one is always sent.
          ...(route.action === "workflows.create" && {
            examples: [[() => ({ path: "/workflows", query: "", absent: false }), NESTED_FAN_OUT, false]],
          }),
        },
      );
      if (route.method === "POST" && route.status === 201 && route.resource === "Workflow") {
        // Runs need an active workflow, whatever was generated.
        const wf = await api(suite.p.baseUrl, "POST", "/workflows", {
          key: suite.acme.live,
          body: { name: "fuzz", trigger: { type: "manual" }, steps: [{ type: "approval" }] },
        });
        pools.Workflow.push([wf.body.data.id]);
      }
      if (route.action === "workflows.create") {
        // A hook whose secret the platform made, to rotate whatever was generated.
        const wf = await api(suite.p.baseUrl, "POST", "/workflows", {
          key: suite.acme.live,
          body: { name: "fuzz hook", trigger: { type: "webhook", verify: { scheme: "github" } }, steps: [{ type: "approval" }] },
        });
        pools.Hook.push([wf.body.data.id]);
      }
      if (route.action === "events.emit") {
        // Deliveries to list and redeliver: a webhook on every event, and an event after it.
        const hook = await api(suite.p.baseUrl, "POST", "/webhooks", {
          key: suite.acme.live,
          body: { url: receiver.url("/all"), events: ["*"] },
        });
        receiver.setSecret("/all", hook.body.data.secret);
        pools.Webhook.push([hook.body.data.id]);
        // And one whose receiver refuses: its delivery stays pending (the next attempt minutes away), to retry now.
        receiver.behave("/refuse", () => ({ status: 500 }));
        const refusing = await api(suite.p.baseUrl, "POST", "/webhooks", {
          key: suite.acme.live,
          body: { url: receiver.url("/refuse"), events: ["fuzz.done"] },
        });
        await api(suite.p.baseUrl, "POST", "/events", { key: suite.acme.live, body: { type: "fuzz.done" } });
        await waitFor("a failed attempt of the refused delivery", async () => {
          const list = await api(suite.p.baseUrl, "GET", `/webhooks/${refusing.body.data.id}/deliveries`, { key: suite.acme.live });
          const tried = list.body.data.filter((d: { attempts: unknown[] }) => d.attempts.length > 0);
          for (const d of tried) pools.Delivery.push([refusing.body.data.id, d.id]);
          return tried.length > 0;
        });
        await waitFor("a delivery to the webhook", async () => {
          const list = await api(suite.p.baseUrl, "GET", `/webhooks/${hook.body.data.id}/deliveries`, { key: suite.acme.live });
          // Settled: a pending delivery cannot be redelivered yet.
          const settled = list.body.data.filter((d: { status: string }) => d.status !== "pending");
          for (const d of settled) pools.Delivery.push([hook.body.data.id, d.id]);
          return settled.length > 0;
        });
      }
    }, 60_000);
  }

  it("reached every operation: each answered its success at least once, and refused broken bodies", () => {
    // Every operation was reached, and each answered its success at least once.
    const succeeded = Object.entries(seen)
      .filter(([label, statuses]) => !label.includes("/listen/") && ![...statuses].some((s) => s < 300))
      .map(([label, statuses]) => `${label}: ${[...statuses].join(", ")}`);
    expect(succeeded).toEqual([]);
    // Map and parallel steps were generated and accepted, also inside one another.
    expect([...createdWith].sort()).toEqual(expect.arrayContaining(["map@0", "map@1", "parallel@0", "parallel@1"]));
    // And every operation that takes a body was sent broken ones, and refused them.
    const withBody = operations.filter(({ op }) => op.requestBody).map(({ route }) => `${route.method} ${route.path}`);
    expect(withBody.filter((label) => !refusedBroken.has(label))).toEqual([]);
  });
});
