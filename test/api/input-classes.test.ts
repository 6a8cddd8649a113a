import { createServer, type IncomingMessage, type Server } from "node:http";
import fc from "fast-check";
import { request } from "undici";
import {
  formatPath,
  MAX_JSON_DEPTH,
  MAX_JSON_ITEMS,
  MAX_JSON_KEYS,
  MAX_JSON_OBJECT_KEYS,
  type PathSegment,
} from "../../shared/api/json-limits";
import { api, expectError, usePlatform, type ApiResponse } from "../helpers/platform";
import { SPECIAL_KEYS } from "../helpers/odd-json";
import { eventuallyValue } from "../../tools/eventually";

/**
 * Whole classes of bad (and odd but good) input, through real HTTP: bodies nested just within and
 * just past the limit, strings that are not well-formed Unicode, keys that stores and copies like
 * to mangle, remote answers of the same kinds, and the event loop staying free while the worst of
 * them arrive. See shared/api/json-limits.ts for how nesting is counted.
 */
const suite = usePlatform({ WEBHOOK_ALLOW_PRIVATE_TARGETS: "true", WORKFLOW_RETRY_BASE_MS: "20", RATE_LIMIT_MAX: "1000000" });

const post = (path: string, raw: string): Promise<ApiResponse> =>
  api(suite.p.baseUrl, "POST", path, { key: suite.acme.live, raw, headers: { "content-type": "application/json" } });
const call = (method: string, path: string, body?: unknown) => api(suite.p.baseUrl, method, path, { key: suite.acme.live, body });

/** Own members, `__proto__` included (an object literal or `o[k] = v` would set the prototype). */
const objectOf = (entries: [string, unknown][]): Record<string, unknown> => Object.fromEntries(entries);

const SPECIAL_TEXT = [
  "\u0000",
  "\u2028",
  "\u2029",
  "\u0085",
  "\ufeff",
  "\ufffd",
  "😀",
  "e\u0301",
  "\\",
  '"',
  "</script>",
  "\r\n",
  "\\ud800",
  "{{input.x}}",
  "\u{10ffff}",
];

const key = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...SPECIAL_KEYS) },
  { weight: 2, arbitrary: fc.string({ unit: "grapheme", maxLength: 8 }) },
  { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 6 }).filter((s) => s.isWellFormed()) },
);
const text = fc.oneof(
  fc.constantFrom(...SPECIAL_TEXT),
  fc.string({ unit: "grapheme" }),
  fc.string({ unit: "binary" }).filter((s) => s.isWellFormed()),
  fc.array(fc.constantFrom(...SPECIAL_TEXT)).map((parts) => parts.join("")),
);
const jsonValue = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constant(null),
    fc.boolean(),
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    text,
    fc.array(tie("value"), { maxLength: 5 }),
    fc.array(fc.tuple(key, tie("value")), { maxLength: 5 }).map(objectOf),
  ),
})).value;

/**
 * A chain of objects and arrays at `data.chain` (`data` is level 2 of the body, the first link level
 * 3), each with scalar siblings before and after it, and `leaf` innermost. Answers the data and the
 * path of every link and of the leaf (`paths[i]` is at level 3 + i), so a test knows where any
 * level is.
 */
interface Chain {
  data: Record<string, unknown>;
  paths: PathSegment[][];
}
const link = fc.record({ array: fc.boolean(), key, before: fc.nat(2), after: fc.nat(1) });
function chainOf(links: { array: boolean; key: string; before: number; after: number }[], leaf: unknown): Chain {
  // Built from the inside out; the paths from the outside in.
  let inner: unknown = leaf;
  for (let i = links.length - 1; i >= 0; i--) {
    const { array, before, after } = links[i];
    if (array) inner = [...Array(before).fill(0), inner, ...Array(after).fill("x")];
    else {
      const k = links[i].key;
      // Siblings have keys the chain's key cannot take; `k` comes after `before` of them.
      const pad = (n: number, tag: string) => Array.from({ length: n }, (_, j): [string, unknown] => [`${tag}${j}\u0001${k}`, j]);
      inner = objectOf([...pad(before, "b"), [k, inner], ...pad(after, "z")]);
    }
  }
  const data = objectOf([
    ["first", 1],
    ["chain", inner],
  ]);
  const paths: PathSegment[][] = [];
  let path: PathSegment[] = ["data", "chain"];
  for (const l of links) {
    paths.push(path);
    path = [...path, l.array ? l.before : l.key];
  }
  paths.push(path);
  return { data, paths };
}

describe("nesting", () => {
  it(`takes bodies ${MAX_JSON_DEPTH} levels deep and refuses deeper ones, naming where the limit is crossed`, async () => {
    // body (1) > data (2) > chain (3) > links…: a body of L links is 3 + L - 1 levels deep, plus the leaf's.
    await fc.assert(
      fc.asyncProperty(
        fc.array(link, { minLength: MAX_JSON_DEPTH - 5, maxLength: MAX_JSON_DEPTH + 2 }),
        fc.constantFrom<unknown>(1, "x", null, {}, []),
        async (links, leaf) => {
          const { data, paths } = chainOf(links, leaf);
          const depth = 2 + links.length + (typeof leaf === "object" && leaf !== null ? 1 : 0);
          const res = await post("/events", JSON.stringify({ type: "deep.shape", data }));
          if (depth <= MAX_JSON_DEPTH) {
            expect(res.status).toBe(201);
            expect(JSON.stringify(res.body.data.data)).toBe(JSON.stringify(data));
          } else {
            // The container at level MAX + 1: `data` is level 2, paths[0] (chain) level 3, …
            const crossing = paths[MAX_JSON_DEPTH + 1 - 3];
            expectError(res, 400, "parameter_invalid", formatPath(crossing));
            expect(res.body.error.message).toContain(`${MAX_JSON_DEPTH} levels deep (the body itself is level 1)`);
          }
        },
      ),
      { numRuns: 60 },
    );
  });

  it("names the path in the project's notation, in every body that takes free-form JSON", async () => {
    const deep = (levels: number) => "[".repeat(levels) + "]".repeat(levels);
    let res = await post("/events", `{"type":"a.b","data":{"a":{"b":${deep(31)}}}}`);
    expectError(res, 400, "parameter_invalid", `data.a.b${"[0]".repeat(29)}`);
    const wf = (await call("POST", "/workflows", { name: "deep", trigger: { type: "manual" }, steps: [{ type: "delay", duration_ms: 1 }] }))
      .body.data;
    res = await post(`/workflows/${wf.id}/runs`, `{"input":{"x":[0,1,2,${deep(30)}]}}`);
    expectError(res, 400, "parameter_invalid", `input.x[3]${"[0]".repeat(29)}`);
    res = await post(
      "/workflows",
      `{"name":"w","trigger":{"type":"manual"},"steps":[{"type":"http","url":"http://127.0.0.1:9/","body":{"a.b":${deep(29)}}}]}`,
    );
    expectError(res, 400, "parameter_invalid", `steps[0].body["a.b"]${"[0]".repeat(28)}`);
    // Exactly at the limit is fine everywhere.
    expect((await post("/events", `{"type":"a.b","data":{"a":{"b":${deep(29)}}}}`)).status).toBe(201);
    expect((await post(`/workflows/${wf.id}/runs`, `{"input":{"x":[0,1,2,${deep(29)}]}}`)).status).toBe(201);
  });

  it("refuses 1 MiB of brackets in a few milliseconds: invalid JSON when broken, too deep when not", async () => {
    const half = 512 * 1024 - 16;
    const cases: [string, string, string, string?][] = [
      ["[[[[… unclosed", "[".repeat(1024 * 1024), "invalid_json"],
      ["[[[[…]]]] (not an object)", `${"[".repeat(half)}${"]".repeat(half)}`, "invalid_json"],
      ['{"data":[[[[… unclosed', `{"data":${"[".repeat(1024 * 1024 - 10)}`, "invalid_json"],
      [
        '{"data":[[[[…]]]]}',
        `{"data":${"[".repeat(half)}${"]".repeat(half)}}`,
        "parameter_invalid",
        `data${"[0]".repeat(MAX_JSON_DEPTH - 1)}`,
      ],
      [
        '{"data":{"a":{"a":…}}}',
        `{"data":${'{"a":'.repeat(170_000)}1${"}".repeat(170_000)}}`,
        "parameter_invalid",
        `data${".a".repeat(MAX_JSON_DEPTH - 1)}`,
      ],
    ];
    for (const [, body, code, param] of cases) {
      expect(Buffer.byteLength(body)).toBeLessThanOrEqual(1024 * 1024);
      const started = performance.now();
      const res = await post("/events", body);
      expectError(res, 400, code, param);
      expect(performance.now() - started).toBeLessThan(1_000);
    }
  });
});

describe("odd keys and strings", () => {
  it("echoes any JSON value with odd keys and strings exactly, as event data", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(key, jsonValue), { maxLength: 6 }).map(objectOf), async (data) => {
        const body = JSON.stringify({ type: "odd.keys", data });
        const res = await post("/events", body);
        expect(res.status).toBe(201);
        expect(JSON.stringify(res.body.data.data)).toBe(JSON.stringify(data));
      }),
      { numRuns: 150 },
    );
  });

  it("echoes fast-check's own JSON values exactly", async () => {
    await fc.assert(
      fc.asyncProperty(fc.dictionary(key, fc.jsonValue({ maxDepth: 4 }), { maxKeys: 5 }), async (data) => {
        const res = await post("/events", JSON.stringify({ type: "odd.values", data }));
        expect(res.status).toBe(201);
        expect(JSON.stringify(res.body.data.data)).toBe(JSON.stringify(data));
      }),
      { numRuns: 100 },
    );
  });

  it("keeps special keys in run input, step body, headers and emitted data, through a run", async () => {
    const got: { rawHeaders: string[]; body: string }[] = [];
    const server = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        got.push({ rawHeaders: req.rawHeaders, body });
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(objectOf(SPECIAL_KEYS.map((k) => [k, k]))));
      });
    });
    await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
    try {
      const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/x`;
      // (A computed key defines a member, even `__proto__`.)
      const odd = objectOf(SPECIAL_KEYS.map((k, i) => [k, { [k]: i }]));
      const tokenKeys = ["a.b", "$x", "$$date", "__proto__", "constructor", "prototype"];
      const headers = objectOf(tokenKeys.map((k) => [k, `v${k}`]));
      const body = objectOf([
        ...SPECIAL_KEYS.map((k): [string, unknown] => [k, k]),
        ["from_input", "{{input.__proto__}}"],
        ["all", "{{input}}"],
      ]);
      const emitData = objectOf([
        ["answer", "{{steps.call.output.body}}"],
        ["__proto__", "{{steps.call.output.body.__proto__}}"],
        ["constructor", "{{input.constructor}}"],
      ]);
      const steps = [
        { id: "call", type: "http", url, headers, body },
        { id: "tell", type: "emit", event_type: "odd.told", data: emitData },
      ];
      const created = await post("/workflows", JSON.stringify({ name: "odd", trigger: { type: "manual" }, steps }));
      expect(created.status).toBe(201);
      expect(JSON.stringify(created.body.data.steps[0].headers)).toBe(JSON.stringify(headers));
      expect(JSON.stringify(created.body.data.steps[0].body)).toBe(JSON.stringify(body));
      expect(JSON.stringify(created.body.data.steps[1].data)).toBe(JSON.stringify(emitData));

      const started = await post(`/workflows/${created.body.data.id}/runs`, JSON.stringify({ input: odd }));
      expect(started.status).toBe(201);
      expect(JSON.stringify(started.body.data.input)).toBe(JSON.stringify(odd));

      const runPath = `/workflows/${created.body.data.id}/runs/${started.body.data.id}`;
      const run = await eventuallyValue(
        "the run to end",
        async () => (await call("GET", runPath)).body.data,
        (r) => r.status === "succeeded" || r.status === "failed",
        8000,
        25,
      );
      expect(run.status).toBe("succeeded");
      expect(got).toHaveLength(1);
      const sent = JSON.stringify(
        objectOf([...SPECIAL_KEYS.map((k): [string, unknown] => [k, k]), ["from_input", odd.__proto__], ["all", odd]]),
      );
      expect(got[0].body).toBe(sent);
      const receivedHeaders = new Map<string, string>();
      for (let i = 0; i < got[0].rawHeaders.length; i += 2) receivedHeaders.set(got[0].rawHeaders[i], got[0].rawHeaders[i + 1]);
      for (const k of tokenKeys) expect(receivedHeaders.get(k)).toBe(`v${k}`);
      const told = (await call("GET", `/events/${run.steps[1].output.event_id}`)).body.data;
      const answer = objectOf(SPECIAL_KEYS.map((k) => [k, k]));
      expect(JSON.stringify(told.data)).toBe(
        JSON.stringify(
          objectOf([
            ["answer", answer],
            ["__proto__", "__proto__"],
            ["constructor", odd.constructor],
          ]),
        ),
      );
    } finally {
      server.closeAllConnections();
      await new Promise((ok) => server.close(ok));
    }
  });

  it("refuses odd keys at the top of a body as unknown parameters, naming them", async () => {
    for (const k of ["", "constructor", "__proto__", "toString", "$$strict", "$$async", "\u0000", "a.b", "$x"]) {
      const res = await post(
        "/events",
        JSON.stringify(
          objectOf([
            ["type", "a.b"],
            [k, 1],
          ]),
        ),
      );
      expectError(res, 400, "parameter_unknown", k);
    }
  });

  it("refuses lone surrogates in values and keys, anywhere, naming the path", async () => {
    const lone = fc.constantFrom("\ud800", "\udfff", "a\udc00b", "\ud83d", "x\ude00");
    await fc.assert(
      fc.asyncProperty(fc.array(link, { maxLength: 8 }), lone, fc.boolean(), async (links, bad, inKey) => {
        const leaf = inKey
          ? objectOf([
              ["fine", 1],
              [bad, 1],
            ])
          : bad;
        const { data, paths } = chainOf(links, leaf);
        const innermost = paths[paths.length - 1];
        // JSON.stringify writes lone surrogates as \u escapes: what a client would send.
        const body = JSON.stringify({ type: "lone.surrogate", data });
        expect(body).toMatch(/\\u[dD][89a-fA-F]/);
        const res = await post("/events", body);
        expectError(res, 400, "parameter_invalid", formatPath(inKey ? [...innermost, bad] : innermost));
        expect(res.body.error.message).toContain("not well-formed Unicode");
        expect(res.body.error.message.startsWith("The key of ")).toBe(inKey);
      }),
      { numRuns: 60 },
    );
    // Pairs, and text that only looks like an escape, are fine.
    const fine = await post("/events", '{"type":"a.b","data":{"\\ud83d\\ude00":"\\ud83d\\ude00","t":"\\\\ud800"}}');
    expect(fine.status).toBe(201);
    expect(fine.body.data.data).toEqual({ "😀": "😀", t: "\\ud800" });
  });
});

describe("answers of http steps", () => {
  let server: Server;
  let url: string;
  let answer: () => string;
  let hits = 0;
  beforeAll(async () => {
    server = createServer((req: IncomingMessage, res) => {
      req.resume();
      req.on("end", () => {
        hits += 1;
        res.writeHead(200, { "content-type": "application/json" }).end(answer());
      });
    });
    await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}/answer`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((ok) => server.close(ok));
  });

  async function runOnce(steps: unknown[]) {
    hits = 0;
    const wf = (await call("POST", "/workflows", { name: "answers", trigger: { type: "manual" }, steps })).body.data;
    const run = (await call("POST", `/workflows/${wf.id}/runs`, {})).body.data;
    return eventuallyValue(
      "the run to end",
      async () => (await call("GET", `/workflows/${wf.id}/runs/${run.id}`)).body.data,
      (now) => ["succeeded", "failed", "cancelled"].includes(now.status),
      8000,
      20,
    );
  }

  const nested = (levels: number) => '{"k":'.repeat(levels - 1) + '{"k":"bottom"}' + "}".repeat(levels - 1);

  it(`keeps an answer ${MAX_JSON_DEPTH} levels deep`, async () => {
    answer = () => nested(MAX_JSON_DEPTH);
    const run = await runOnce([{ id: "call", type: "http", url }]);
    expect(run.status).toBe("succeeded");
    expect(JSON.stringify(run.steps[0].output.body)).toBe(nested(MAX_JSON_DEPTH));
  });

  it.each([
    [
      "nested one level deeper",
      () => nested(MAX_JSON_DEPTH + 1),
      `the answer's JSON is nested deeper than ${MAX_JSON_DEPTH} levels of objects and arrays (at ${"k.".repeat(MAX_JSON_DEPTH).slice(0, -1)})`,
    ],
    [
      "of 60 KiB of brackets",
      () => "[".repeat(30_000) + "]".repeat(30_000),
      `the answer's JSON is nested deeper than ${MAX_JSON_DEPTH} levels of objects and arrays (at ${"[0]".repeat(MAX_JSON_DEPTH)})`,
    ],
    [
      "holding a lone surrogate",
      () => '{"ok":true,"list":["\\ud800"]}',
      "the answer's JSON is not well-formed Unicode: a string holds a lone UTF-16 surrogate (at list[0])",
    ],
    [
      "with a lone surrogate in a key",
      () => '{"\\udc00":1}',
      'the answer\'s JSON is not well-formed Unicode: a key holds a lone UTF-16 surrogate (at ["\\udc00"])',
    ],
  ])("fails an attempt whose answer is %s, under the step's retries, and stores none of it", async (_name, body, error) => {
    answer = body;
    const run = await runOnce([{ id: "call", type: "http", url, retries: 2 }]);
    expect(run.status).toBe("failed");
    expect(run.steps[0]).toMatchObject({ status: "failed", attempt_count: 3, error, output: { status_code: 200, body: null } });
    // Each attempt's request arrived before its answer was read: the run's end counts them all.
    expect(hits).toBe(3);
  });

  it("fails an emit step whose templates would put a value too deep into its event, once", async () => {
    answer = () => nested(MAX_JSON_DEPTH);
    const run = await runOnce([
      { id: "call", type: "http", url },
      { id: "tell", type: "emit", event_type: "deep.copy", data: { copy: "{{steps.call.output.body}}" } },
    ]);
    expect(run.status).toBe("failed");
    expect(run.steps[1]).toMatchObject({ status: "failed", attempt_count: 1 });
    expect(run.steps[1].error).toMatch(
      /^the event's data, once its templates are filled, is nested deeper than 32 levels of objects and arrays \(at data\.copy(\.k)+\)$/,
    );
    expect((await call("GET", "/events?type=deep.copy")).body.meta.total).toBe(0);
  });
});

describe("keys", () => {
  const keys = (n: number, prefix = "k") => Array.from({ length: n }, (_, i) => `"${prefix}${i}":${i % 10}`).join(",");

  it(`takes ${MAX_JSON_OBJECT_KEYS} keys in an object and ${MAX_JSON_KEYS} in all, and refuses more, naming where`, async () => {
    expect((await post("/events", `{"type":"wide.ok","data":{${keys(MAX_JSON_OBJECT_KEYS)}}}`)).status).toBe(201);
    const wide = await post("/events", `{"type":"wide.no","data":{"a":[{${keys(MAX_JSON_OBJECT_KEYS + 1)}}]}}`);
    expectError(wide, 400, "parameter_invalid", "data.a[0]");
    expect(wide.body.error.message).toMatch(new RegExp(`more than ${MAX_JSON_OBJECT_KEYS} keys`));
    // `type`, `data`, ten objects of 998 keys in `data` and `x` with 7: exactly the limit in all.
    const many = Array.from({ length: 10 }, (_, i) => `"o${i}":{${keys(MAX_JSON_OBJECT_KEYS - 2)}}`).join(",");
    const full = await post("/events", `{"type":"many.keys","data":{${many},"x":{${keys(7)}}}}`);
    expectError(full, 400, "parameter_invalid", "data");
    expect(full.body.error.message).toMatch(/65536/);
    const over = await post("/events", `{"type":"many.keys","data":{${many},"x":{${keys(8)}}}}`);
    expectError(over, 400, "parameter_invalid", "data.x");
    expect(over.body.error.message).toMatch(new RegExp(`more than ${MAX_JSON_KEYS} keys in all`));
  });

  it("refuses unknown parameters naming a few, in a short answer", async () => {
    const res = await post("/events", `{"type":"a.b",${keys(MAX_JSON_OBJECT_KEYS - 1, "x")}}`);
    expectError(res, 400, "parameter_unknown", "x0");
    expect(res.body.error.message).toBe(`Received unknown parameters: x0, x1, x2 and ${MAX_JSON_OBJECT_KEYS - 4} more`);
    const org = suite.acme.org.id;
    const patch = await api(suite.p.baseUrl, "PATCH", `/orgs/${org}`, {
      key: suite.acme.live,
      raw: `{"name":"Acme",${keys(MAX_JSON_OBJECT_KEYS - 1, "y")}}`,
      headers: { "content-type": "application/json" },
    });
    expectError(patch, 400, "parameter_unknown", "y0");
    expect(JSON.stringify(patch.body).length).toBeLessThan(400);
    // A body past the reader's limit is refused before it is built.
    expectError(await post("/events", `{${keys(75_000)}}`), 400, "parameter_invalid");
  });
  it("keeps answering /health while the bodies of most keys and items, accepted and refused, arrive", async () => {
    const limit = 1024 * 1024;
    // The most keys a body may hold, each as long as 1 MiB allows: ten objects of 998 keys and
    // one of 7 in `data` (with `type` and `data`, MAX_JSON_KEYS in all), about 100 bytes a key.
    const name = (i: number) => `k${i}`.padEnd(96, "-");
    const object = (n: number, from: number) => `{${Array.from({ length: n }, (_, i) => `"${name(from + i)}":${i % 10}`).join(",")}}`;
    const inner = Array.from({ length: 10 }, (_, o) => `"o${o}":${object(MAX_JSON_OBJECT_KEYS - 2, o * 1000)}`).join(",");
    const widest = `{"type":"wide.shape","data":{${inner},"x":${object(7, 0)}}}`;
    // A thousand unknown top-level parameters with 1 KiB names: refused by the gateway, naming three.
    const unknown = `{"type":"a.b",${Array.from({ length: MAX_JSON_OBJECT_KEYS - 1 }, (_, i) => `"${`u${i}`.padEnd(1000, "-")}":1`).join(",")}}`;
    // 75,000 top-level keys: refused by the reader before anything is built.
    const refusedWide = `{${Array.from({ length: 75_000 }, (_, i) => `"k${i}":${i % 10}`).join(",")}}`;
    // The most array items a body may hold, as empty objects (the dearest to build), padded to
    // 1 MiB with a string; and 1 MiB of them, which the reader refuses.
    const objects = (n: number) => Array(n).fill("{}").join(",");
    const itemsHead = `{"type":"many.items","data":{"a":[${objects(MAX_JSON_ITEMS)}],"pad":"`;
    const mostItems = `${itemsHead}${"x".repeat(limit - itemsHead.length - 10)}"}}`;
    const refusedItems = `{"type":"many.items","data":{"a":[${objects(Math.floor((limit - 100) / 3))}]}}`;
    const bodies = [widest, unknown, refusedWide, mostItems, refusedItems];
    for (const body of bodies) expect(Buffer.byteLength(body)).toBeLessThanOrEqual(limit);
    for (const body of [widest, mostItems, refusedItems]) expect(Buffer.byteLength(body)).toBeGreaterThan(limit * 0.9);

    expectError(await post("/events", widest), 400, "parameter_invalid", "data");
    expectError(await post("/events", unknown), 400, "parameter_unknown", `u0`.padEnd(1000, "-"));
    expectError(await post("/events", refusedWide), 400, "parameter_invalid");
    expectError(await post("/events", mostItems), 400, "parameter_invalid", "data");
    expectError(await post("/events", refusedItems), 400, "parameter_invalid", "data.a");

    const flat = `{"type":"big.shape","data":{"k":"${"x".repeat(limit - 100)}"}}`;
    const baseline = await healthWhile([flat], 2);
    const worst = await healthWhile(bodies, 2);
    console.log(
      `/health while 1 MiB bodies arrive (p50 / p99 / max ms): flat ${baseline.summary}; most keys and items ${worst.summary}; bodies: ${JSON.stringify(worst.outcomes)}`,
    );
    expect(Object.keys(worst.outcomes).sort()).toEqual(["400 parameter_invalid", "400 parameter_unknown"]);
    expect(worst.p50).toBeLessThan(4 * baseline.p50 + 20);
    // A body's cost to this process: near that of a flat body of the same size, far from the
    // hundreds of milliseconds 75,000 keys cost before the reader counted them.
    expect(worst.perBody).toBeLessThan(2 * baseline.perBody + 5);
  }, 60_000);
});

/**
 * /health requests measured while bodies arrive. No latency is held to a fixed number (the machine
 * is shared): the worst shapes are compared with a baseline measured in the same test, flat bodies
 * of the same size refused on the same path (event data over 64 KiB). A reader that froze on deep
 * shapes would be orders of magnitude past it; the bound leaves room for the extra scans the checks
 * make.
 */
const HEALTH_SAMPLES = 150;

/**
 * /health asked HEALTH_SAMPLES times in a loop (each awaited) while `senders` clients (one per body
 * by default) POST the bodies back to back, each client going round all of them from its own start.
 */
async function healthWhile(bodies: string[], senders = bodies.length) {
  const origin = suite.p.baseUrl.replace(/\/v1$/, "");
  let stop = false;
  const outcomes: Record<string, number> = {};
  const cpu = process.cpuUsage();
  let sent = 0;
  const load = Array.from({ length: senders }, async (_, first) => {
    for (let i = first; !stop; i++) {
      sent += 1;
      const res = await post("/events", bodies[i % bodies.length]);
      const outcome = `${res.status} ${res.body?.error?.code}`;
      outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
    }
  });
  // Wait until both senders have had an answer, so the load is on before the first sample.
  while (Object.values(outcomes).reduce((a, b) => a + b, 0) < senders) await new Promise((r) => setImmediate(r));
  const times: number[] = [];
  for (let i = 0; i < HEALTH_SAMPLES; i++) {
    const started = performance.now();
    const res = await request(`${origin}/health`);
    await res.body.text();
    times.push(performance.now() - started);
    expect(res.statusCode).toBe(200);
  }
  stop = true;
  await Promise.all(load);
  // This process's CPU time (the platform's and the client's) per body: the event loop's cost of one.
  const used = process.cpuUsage(cpu);
  const perBody = (used.user + used.system) / 1000 / sent;
  times.sort((a, b) => a - b);
  const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))];
  const summary = `${at(0.5).toFixed(1)} / ${at(0.99).toFixed(1)} / ${times[times.length - 1].toFixed(1)}, CPU ${perBody.toFixed(1)} ms a body`;
  return { outcomes, p50: at(0.5), perBody, summary };
}

describe("the event loop", () => {
  it("keeps answering /health while the worst accepted and refused bodies arrive", async () => {
    const limit = 1024 * 1024;
    // The worst a body may be and still be read: exactly 32 levels (the body, then `data` and 30
    // objects inside it) and near 1 MiB, the bottom string full of escaped surrogate pairs (each a
    // candidate the lone-surrogate check must look at) and escaped characters. (POST /events then
    // refuses it as over 64 KiB of data: the point is the reading.)
    const unit = "\\ud83d\\ude00 caf\\u00e9 \\u2028 ";
    const pad = unit.repeat(Math.floor((limit - 1000) / unit.length));
    const worstAccepted = `{"type":"big.shape","data":${'{"k":'.repeat(MAX_JSON_DEPTH - 1)}"${pad}"${"}".repeat(MAX_JSON_DEPTH - 1)}}`;
    const half = limit / 2 - 16;
    const refusedDeep = `{"data":${"[".repeat(half)}${"]".repeat(half)}}`;
    expect(Buffer.byteLength(worstAccepted)).toBeLessThanOrEqual(limit);
    expect(Buffer.byteLength(worstAccepted)).toBeGreaterThan(limit - 1000);

    const accepted = await post("/events", worstAccepted);
    expectError(accepted, 400, "parameter_invalid", "data");
    expect(accepted.body.error.message).toMatch(/65536/);
    // One more level, and the reader refuses it.
    const deeper = await post("/events", worstAccepted.replace('"data":', '"data":{"k":').replace(/\}$/, "}}"));
    expectError(deeper, 400, "parameter_invalid", `data${".k".repeat(MAX_JSON_DEPTH - 1)}`);

    const flat = `{"type":"big.shape","data":{"k":"${"x".repeat(limit - 100)}"}}`;
    const baseline = await healthWhile([flat, flat]);
    const worst = await healthWhile([worstAccepted, refusedDeep]);
    console.log(
      `/health while 1 MiB bodies arrive (p50 / p99 / max ms): flat ${baseline.summary}; worst shapes ${worst.summary}; bodies: ${JSON.stringify(worst.outcomes)}`,
    );
    expect(Object.keys(baseline.outcomes)).toEqual(["400 parameter_invalid"]);
    expect(Object.keys(worst.outcomes).sort()).toEqual(["400 parameter_invalid"]);
    expect(worst.p50).toBeLessThan(4 * baseline.p50 + 20);
  }, 60_000);
});
