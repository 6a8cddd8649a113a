/**
 * Authenticated `GET /v1/api-keys/{id}` against a bare node:http JSON server, in one run:
 *   bare      — node:http answering a JSON body of the same size (the baseline)
 *   single    — the whole platform in one process (`npm start`)
 *   trivial   — the reference for the cluster: a moleculer-web alias calling a trivial action on
 *               another node over NATS (bench/trivial-route.ts), no key and no store
 *   cluster   — gateway and keys (with auth, orgs) in separate processes over NATS, one SQLite file
 * Prints requests/s, p50/p99 latency, peak RSS of the serving processes, and the ratio to bare.
 * Then the revocation race: time from DELETE on one gateway to the first 401 on another.
 *
 * Bare, trivial and cluster run twice: with BENCH_CONNECTIONS (20) and BENCH_MANY_CONNECTIONS (100).
 * Bare runs first and again last; ratios are to the mean of its two runs.
 *
 *   npm run build && node dist/bench/core.js        (BENCH_SECONDS=10 BENCH_CONNECTIONS=20 BENCH_MANY_CONNECTIONS=100 BENCH_REVOCATIONS=200)
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import autocannon from "autocannon";
import { request } from "undici";
import { freePort, peakRssMiB, runCli, startNats, startNode, waitFor, type Proc } from "../tools/procs";
import { API_KEY_BODY, mean, quantile } from "./lib";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 20);
/** A second, busier load for bare, trivial and cluster: with 20 connections the cluster's answer time, not its CPU, caps its rate. */
const MANY = Number(process.env.BENCH_MANY_CONNECTIONS ?? 100);
/** Revocation races: with 50, "p99" was the second-worst of the runs. */
const REVOCATIONS = Number(process.env.BENCH_REVOCATIONS ?? 200);
const NO_LIMIT = { RATE_LIMIT_MAX: "10000000", LOG_LEVEL: "warn" };

interface Figures {
  name: string;
  connections: number;
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  rssMiB: number[];
}

async function load(
  name: string,
  url: string,
  headers: Record<string, string>,
  procs: Proc[],
  connections = CONNECTIONS,
): Promise<Figures> {
  // A short warm-up fills caches and JIT before the measured run.
  await autocannon({ url, headers, connections, duration: 2 });
  const result = await autocannon({ url, headers, connections, duration: SECONDS });
  return {
    name,
    connections,
    rps: Math.round(result.requests.average),
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.non2xx + result.errors + result.timeouts,
    rssMiB: procs.map((p) => peakRssMiB(p.child.pid) ?? -1),
  };
}

const BARE_SERVER = `
const http = require("node:http");
const body = process.argv[2];
http.createServer((req, res) => {
  res.writeHead(200, { "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(body), "request-id": "req_x" });
  res.end(body);
}).listen(Number(process.argv[1]), "127.0.0.1");
`;

async function getJson(url: string, key: string, method = "GET"): Promise<{ status: number; body: any }> {
  const res = await request(url, { method: method as "GET", headers: { authorization: `Bearer ${key}` } });
  return { status: res.statusCode, body: await res.body.json() };
}

async function benchKey(base: string, admin: string): Promise<{ id: string; key: string }> {
  const res = await request(`${base}/api-keys`, {
    method: "POST",
    headers: { authorization: `Bearer ${admin}`, "content-type": "application/json" },
    body: JSON.stringify({ name: "bench", scopes: ["api-keys:read"] }),
  });
  return ((await res.body.json()) as { data: { id: string; key: string } }).data;
}

/** node:http answering the same body, at both loads. */
async function bareRuns(name: string): Promise<Figures[]> {
  const port = await freePort();
  const child = spawn(process.execPath, ["-e", BARE_SERVER, String(port), JSON.stringify({ data: API_KEY_BODY })], { stdio: "inherit" });
  const bare: Proc = { name: "bare", child, output: () => "", kill: async () => void child.kill("SIGKILL") };
  try {
    await waitFor("bare server", async () => (await request(`http://127.0.0.1:${port}/`)).statusCode === 200);
    const url = `http://127.0.0.1:${port}/v1/api-keys/key_x`;
    return [await load(name, url, {}, [bare]), await load(name, url, {}, [bare], MANY)];
  } finally {
    await bare.kill();
  }
}

async function main(): Promise<void> {
  const results: Figures[] = [];
  const cleanups: (() => Promise<void> | void)[] = [];
  try {
    // The bare baseline runs first and again last: the machine is shared and noisy.
    results.push(...(await bareRuns("bare node:http (first)")));

    // Single process.
    {
      const dir = mkdtempSync(join(tmpdir(), "wfp-bench-"));
      cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
      const port = await freePort();
      const node = startNode("single", { ...NO_LIMIT, DATA_DIR: dir, PORT: String(port) });
      cleanups.push(() => node.kill("SIGKILL"));
      await waitFor("the single process to listen", async () => (await fetch(`http://127.0.0.1:${port}/health`)).ok);
      const admin = runCli(["orgs", "create", "--name", "Bench"], { DATA_DIR: dir }).api_keys[0].key;
      const base = `http://127.0.0.1:${port}/v1`;
      const made = await benchKey(base, admin);
      results.push(await load("single process", `${base}/api-keys/${made.id}`, { authorization: `Bearer ${made.key}` }, [node]));
      await node.kill();
    }

    // The reference: a trivial moleculer-web alias calling an action on another node over NATS.
    {
      const nats = await startNats();
      cleanups.push(() => nats.stop());
      const port = await freePort();
      const script = join(__dirname, "trivial-route.js");
      const procs: Proc[] = ["service", "gateway"].map((role) => {
        const child = spawn(process.execPath, [script, role, nats.url, String(port)], { stdio: "inherit" });
        const proc: Proc = { name: role, child, output: () => "", kill: async () => void child.kill("SIGKILL") };
        cleanups.push(() => proc.kill());
        return proc;
      });
      const url = `http://127.0.0.1:${port}/v1/api-keys/key_x`;
      await waitFor("the trivial route", async () => (await request(url)).statusCode === 200);
      results.push(await load("trivial moleculer-web alias, NATS", url, {}, procs.slice().reverse()));
      results.push(await load("trivial moleculer-web alias, NATS", url, {}, procs.slice().reverse(), MANY));
      for (const p of procs) await p.kill();
      await nats.stop();
    }

    // Cluster: gateway | store+keys+auth+orgs, over NATS; a second gateway for the revocation race.
    {
      const nats = await startNats();
      cleanups.push(() => nats.stop());
      const dir = mkdtempSync(join(tmpdir(), "wfp-bench-"));
      cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
      const common = { ...NO_LIMIT, TRANSPORTER: nats.url, DATA_DIR: dir };
      const core = startNode("core", { ...common, SERVICES: "keys,auth,orgs" });
      const [p1, p2] = [await freePort(), await freePort()];
      const gw1 = startNode("gw1", { ...common, SERVICES: "gateway", PORT: String(p1) });
      const gw2 = startNode("gw2", { ...common, SERVICES: "gateway", PORT: String(p2) });
      for (const p of [core, gw1, gw2]) cleanups.push(() => p.kill("SIGKILL"));
      const admin = runCli(["orgs", "create", "--name", "Bench"], { DATA_DIR: dir }).api_keys[0].key;
      const g1 = `http://127.0.0.1:${p1}/v1`;
      const g2 = `http://127.0.0.1:${p2}/v1`;
      for (const g of [g1, g2]) await waitFor(`${g}`, async () => (await getJson(`${g}/api-keys`, admin)).status === 200);
      const made = await benchKey(g1, admin);
      const auth = { authorization: `Bearer ${made.key}` };
      results.push(await load("cluster (gateway | keys over NATS)", `${g1}/api-keys/${made.id}`, auth, [gw1, core]));
      results.push(await load("cluster (gateway | keys over NATS)", `${g1}/api-keys/${made.id}`, auth, [gw1, core], MANY));

      // Revocation race: g2 is polled with the key while g1 revokes it.
      const afterSent: number[] = [];
      const afterAnswered: number[] = [];
      for (let i = 0; i < REVOCATIONS; i += 1) {
        const k = await benchKey(g1, admin);
        await getJson(`${g2}/api-keys/${k.id}`, k.key);
        let firstRefusal = 0;
        let stop = false;
        const poller = (async () => {
          while (!stop) {
            const r = await getJson(`${g2}/api-keys/${k.id}`, k.key);
            if (r.status === 401) {
              firstRefusal = performance.now();
              return;
            }
          }
        })();
        const sent = performance.now();
        await getJson(`${g1}/api-keys/${k.id}`, admin, "DELETE");
        const answered = performance.now();
        await Promise.race([poller, new Promise((r) => setTimeout(r, 2000))]);
        stop = true;
        // After the DELETE answered, the very next request to g2:
        const t0 = performance.now();
        const next = await getJson(`${g2}/api-keys/${k.id}`, k.key);
        if (next.status !== 401) throw new Error(`revoked key answered ${next.status} on the other gateway`);
        afterAnswered.push(performance.now() - t0);
        afterSent.push((firstRefusal || answered) - sent);
      }
      console.log(
        `\nrevocation, ${REVOCATIONS} runs: DELETE sent on gw1 → first 401 on gw2 p50 ${quantile(afterSent, 0.5).toFixed(2)} ms, p99 ${quantile(afterSent, 0.99).toFixed(2)} ms, max ${Math.max(...afterSent).toFixed(2)} ms;` +
          ` DELETE answered → next request on gw2 refused in p50 ${quantile(afterAnswered, 0.5).toFixed(2)} ms, p99 ${quantile(afterAnswered, 0.99).toFixed(2)} ms`,
      );
    }
    results.push(...(await bareRuns("bare node:http (last)")));
  } finally {
    for (const c of cleanups.reverse()) await c();
  }

  const bares = results.filter((r) => r.name.startsWith("bare"));
  const bareAt = new Map(bares.map((r) => [r.connections, mean(bares.filter((b) => b.connections === r.connections).map((b) => b.rps))]));
  console.log(
    `\nGET /v1/api-keys/{id}, ${SECONDS}s each (after a 2s warm-up); each ratio is to bare's mean (first and last run) at the same number of connections`,
  );
  console.log("run                                  conns    req/s    p50 ms  p99 ms  errors  peak RSS MiB   ratio to bare");
  for (const r of results) {
    console.log(
      `${r.name.padEnd(36)} ${String(r.connections).padStart(5)} ${String(r.rps).padStart(8)} ${String(r.p50).padStart(8)} ${String(r.p99).padStart(7)} ${String(r.errors).padStart(7)}  ${r.rssMiB.join("+").padStart(12)}   ${(r.rps / (bareAt.get(r.connections) ?? NaN)).toFixed(2)}x`,
    );
  }
  const of = (prefix: string) => new Map(results.filter((r) => r.name.startsWith(prefix)).map((r) => [r.connections, r.rps]));
  const [trivial, cluster] = [of("trivial"), of("cluster")];
  console.log(
    `cluster ÷ trivial alias: ${[...cluster].map(([c, rps]) => `${(rps / (trivial.get(c) ?? NaN)).toFixed(2)}x at ${c} connections`).join(", ")}`,
  );
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
