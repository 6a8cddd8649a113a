import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import fc from "fast-check";
import { freePort } from "../../tools/procs";
import { startPlatform, type Platform } from "../helpers/platform";
import { runsApi, startStepTarget, type StepTarget } from "../helpers/steps";

/**
 * No filled value is ever quoted: a step's failure, on every path it can fail by, keeps no part of
 * a secret it used. A part is any 8 characters of the value, in any letter case, anywhere in what
 * the API answers (the run, the run lists), in the events stored, or in a log line.
 */
const FRAGMENT = 8;

/** Every log line the brokers print, as the Console logger hands them to `console`. */
const logged: string[] = [];
const methods = ["log", "info", "warn", "error", "debug", "trace"] as const;
beforeAll(() => {
  for (const m of methods) jest.spyOn(console, m).mockImplementation((...args: unknown[]) => void logged.push(args.map(String).join(" ")));
});

function leaks(value: string, text: string): string[] {
  const haystack = text.toLowerCase();
  const found = new Set<string>();
  for (let i = 0; i + FRAGMENT <= value.length; i += 1) {
    const part = value.slice(i, i + FRAGMENT).toLowerCase();
    if (haystack.includes(part)) found.add(part);
  }
  return [...found];
}

let open: Platform;
let guarded: Platform;
let target: StepTarget;
let hanging: Server;
let hangingUrl: string;
let closedPort: number;

beforeAll(async () => {
  const key = `k1:${randomBytes(32).toString("base64")}`;
  // One platform that may call 127.0.0.1 (the targets below), one that refuses private addresses.
  open = await startPlatform({
    LOG_LEVEL: "debug",
    WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
    WORKFLOW_RETRY_BASE_MS: "10",
    SECRETS_KEYS: key,
  });
  guarded = await startPlatform({ LOG_LEVEL: "debug", SECRETS_KEYS: key });
  target = await startStepTarget();
  // Echoes what it got (the Host header, lower-cased by the URL parser, included), with a bad status.
  target.answer = (_n, req) => ({ status: 502, json: { path: req.path, headers: req.headers, body: req.body } });
  hanging = createServer(() => undefined);
  await new Promise<void>((ok) => hanging.listen(0, "127.0.0.1", ok));
  hangingUrl = `http://127.0.0.1:${(hanging.address() as { port: number }).port}`;
  closedPort = await freePort();
});
afterAll(async () => {
  hanging.closeAllConnections();
  await new Promise((ok) => hanging.close(ok));
  await target.close();
  await Promise.all([open.stop(), guarded.stop()]);
  jest.restoreAllMocks();
});

/** The steps that fail on each path, each using the secret S where the path would quote it. */
function failingSteps(where: { target: string; hanging: string; closedPort: number }) {
  const s = "{{secrets.S}}";
  // Not a URL, padded so that a quote cut at 100 or 200 characters would end inside the value.
  const padded = (n: number) => `${"-".repeat(n)}${s}`;
  return {
    badUrl: { url: s },
    badScheme: { url: `ftp${s}://x/` },
    badPort: { url: `http://x:9${s}/` },
    refused: { url: `http://127.0.0.1:${where.closedPort}/${s}`, headers: { "x-token": s } },
    padded100: { url: padded(100 - 12) },
    padded200: { url: padded(200 - 12) },
    padded200Scheme: { url: `http://${padded(200 - 19)}` },
    unresolvable: { url: `http://${s}.invalid/` },
    timeOut: { url: `${where.hanging}/${s}`, headers: { "x-token": s }, body: { token: s }, method: "POST", timeout_ms: 50 },
    badAnswer: { url: `${where.target}/${s}`, headers: { "x-token": s }, body: { token: s }, method: "POST" },
    badAnswerHost: { url: `http://${s}.localtest.invalid:1/`, headers: { "x-token": s } },
  };
}

async function failEverywhere(p: Platform, key: string, value: string, steps: Record<string, object>): Promise<string> {
  const runs = runsApi(
    () => p.baseUrl,
    () => key,
  );
  expect((await runs.call("POST", "/secrets", { name: "S", value })).status).toBe(201);
  const seen: unknown[] = [];
  await Promise.all(
    Object.entries(steps).map(async ([name, fields]) => {
      const wf = await runs.workflow([{ id: name.toLowerCase(), type: "http", retries: 1, ...fields }]);
      const run = await runs.ended(wf.id, await runs.start(wf.id));
      expect({ name, status: run.status }).toEqual({ name, status: "failed" });
      expect(run.steps[0].error).toEqual(expect.any(String));
      seen.push(run, (await runs.call("GET", `/workflows/${wf.id}/runs`)).body);
    }),
  );
  seen.push((await runs.call("GET", "/runs?limit=100")).body, (await runs.call("GET", "/events?limit=100")).body);
  return JSON.stringify(seen);
}

describe("a secret's value on every path a step fails by", () => {
  it("is never quoted, whole or in part, in any case, in an answer, an event or a log line", async () => {
    // Letters of both cases (a host name comes back lower-cased) and digits: valid in a host, a path and a header.
    // No run of three equal characters, so that no part of a value can be mistaken for other text.
    const values = fc
      .stringMatching(/^[A-Za-z][A-Za-z0-9]{15,40}$/)
      .filter((v) => /[A-Z]/.test(v) && /[a-z]/.test(v) && /[0-9]/.test(v) && !/(.)\1\1/.test(v));
    await fc.assert(
      fc.asyncProperty(values, async (value) => {
        logged.length = 0;
        const openOrg = await open.createOrg("Leaks");
        const guardedOrg = await guarded.createOrg("Leaks");
        const where = { target: target.url, hanging: hangingUrl, closedPort };
        const answers = await failEverywhere(open, openOrg.live, value, failingSteps(where));
        // Refused as a private address (http is allowed in the test environment).
        const refusedPrivate = await failEverywhere(guarded, guardedOrg.test, value, {
          privateLiteral: { url: `http://127.0.0.1:${closedPort}/{{secrets.S}}`, headers: { "x-token": "{{secrets.S}}" } },
          privatePadded: { url: `http://127.0.0.1/${"p".repeat(80)}{{secrets.S}}` },
          // Resolved by the target rules, which quote the host name lower-cased.
          unresolvable: { url: `http://{{secrets.S}}.invalid/` },
        });
        expect(target.got.length).toBeGreaterThan(0);
        expect({ value, answers: leaks(value, answers + refusedPrivate), logs: leaks(value, logged.join("\n")) }).toEqual({
          value,
          answers: [],
          logs: [],
        });
      }),
      { numRuns: 4 },
    );
  });
});
