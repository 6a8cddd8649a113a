import { createServer, type Server } from "node:http";
import type { Socket } from "node:net";
import { waitFor } from "../../tools/procs";
import { api, usePlatform } from "../helpers/platform";
import { acmeRuns } from "../helpers/steps";

/**
 * Answers the platform reads from its users' servers are read up to their cap (64 KiB for an http
 * step) and then abandoned: a server streaming forever costs a run that much, not a read until the
 * step's time-out, and the API stays fast beside such runs.
 */

const suite = usePlatform({ WEBHOOK_ALLOW_PRIVATE_TARGETS: "true", RATE_LIMIT_MAX: "100000", RUN_STARTS_PER_MINUTE: "100000" });
const runs = acmeRuns(suite);

let server: Server;
let url: string;
/** Connections /endless served, and those closed. */
const conns = { opened: 0, closed: 0 };
beforeAll(async () => {
  server = createServer((_req, res) => {
    // An answer that never ends, written as fast as the reader takes it.
    res.writeHead(200, { "content-type": "application/json" });
    res.write('{"items":[');
    const chunk = Buffer.from(`${'{"n":1},'.repeat(2048)}`);
    const more = () => {
      while (!res.destroyed && res.write(chunk));
    };
    res.on("drain", more);
    more();
  });
  server.on("connection", (s: Socket) => {
    conns.opened += 1;
    s.on("close", () => (conns.closed += 1));
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  url = `http://127.0.0.1:${(server.address() as { port: number }).port}/endless`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((ok) => server.close(ok));
});

const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];

describe("workflow http steps against an endless answer", () => {
  it("48 runs finish at the 64 KiB cap, long before their time-out, with the cut output; GET /me stays fast", async () => {
    const RUNS = 48;
    const TIMEOUT_MS = 30_000;
    const wf = await runs.workflow([{ id: "fetch", type: "http", method: "GET", url, timeout_ms: TIMEOUT_MS }]);
    const started = Date.now();
    const ids = await Promise.all(Array.from({ length: RUNS }, () => runs.start(wf.id)));

    // GET /me, one after the other, while the runs go and for at least 100 calls.
    const latencies: number[] = [];
    let ended = 0;
    const finishing = Promise.all(ids.map((id) => runs.ended(wf.id, id).finally(() => (ended += 1))));
    while (ended < RUNS || latencies.length < 100) {
      const t = performance.now();
      const me = await api(suite.p.baseUrl, "GET", "/me", { key: suite.acme.live });
      latencies.push(performance.now() - t);
      expect(me.status).toBe(200);
    }
    const done = await finishing;
    const took = Date.now() - started;

    latencies.sort((a, b) => a - b);
    const p50 = quantile(latencies, 0.5);
    const p99 = quantile(latencies, 0.99);
    console.log(
      `${RUNS} runs reading an endless answer ended in ${took} ms (step time-out ${TIMEOUT_MS} ms); ` +
        `GET /me beside them: p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms over ${latencies.length} calls`,
    );
    // Each run reads 64 KiB and lets go: all of them end in a fraction of one step's time-out.
    expect(took).toBeLessThan(TIMEOUT_MS / 2);
    for (const run of done) {
      expect(run.status).toBe("succeeded");
      expect(run.steps[0].output).toMatchObject({ status_code: 200, truncated: true, preview: expect.stringMatching(/^\{"items":\[/) });
      expect(run.steps[0].output.size).toBeGreaterThan(64 * 1024);
    }
    // Reading endless answers until the time-out took GET /me from a p50 of 2 ms to 153 ms.
    expect(p50).toBeLessThan(50);
    expect(p99).toBeLessThan(500);
    // Every connection was dropped at the cap, none kept reading.
    await waitFor("the target to see every connection closed", () => conns.closed === conns.opened, 5_000);
  }, 60_000);
});
