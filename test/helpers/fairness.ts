import { createServer, type ServerResponse } from "node:http";
import { waitFor } from "../../tools/procs";
import { api } from "./platform";

/**
 * The fairness scenario of the run engine (docs/security/fairness.md): one organization holds
 * every slot it may with runs whose http step waits on a server that does not answer, started
 * through the API and fanned out from events; another's short runs are timed meanwhile.
 */

/** An http server that answers nothing until `release()`; then everything, at once and from then on. */
export interface HoldingServer {
  url: string;
  /** Requests held now, and the most ever held at once. */
  held(): number;
  most(): number;
  release(): void;
  close(): Promise<void>;
}

export async function holdingServer(): Promise<HoldingServer> {
  const waiting = new Set<ServerResponse>();
  let most = 0;
  let released = false;
  const answer = (res: ServerResponse) => res.writeHead(200, { "content-type": "application/json" }).end("{}");
  const server = createServer((req, res) => {
    req.resume();
    if (released) return answer(res);
    waiting.add(res);
    most = Math.max(most, waiting.size);
    res.on("close", () => waiting.delete(res));
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    held: () => waiting.size,
    most: () => most,
    release() {
      released = true;
      for (const res of waiting) answer(res);
      waiting.clear();
    },
    async close() {
      server.closeAllConnections();
      await new Promise((ok) => server.close(ok));
    },
  };
}

const call = async (base: string, key: string, method: string, path: string, body?: unknown) => {
  const res = await api(base, method, path, { key, body });
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data;
};

/**
 * The hog: `apiRuns` runs started through the API and `events` events each starting `listeners`
 * workflows, every run's one http step held by `slow` (time-out: the longest allowed).
 */
export async function hog(
  base: string,
  key: string,
  slow: string,
  o: { apiRuns: number; listeners: number; events: number },
): Promise<void> {
  const step = { id: "slow", type: "http", url: `${slow}/hog`, timeout_ms: 60_000 };
  const manual = await call(base, key, "POST", "/workflows", { name: "hog", trigger: { type: "manual" }, steps: [step] });
  for (let i = 0; i < o.listeners; i += 1) {
    await call(base, key, "POST", "/workflows", { name: `fan ${i}`, trigger: { type: "event", event_type: "hog.fan" }, steps: [step] });
  }
  await Promise.all(Array.from({ length: o.apiRuns }, () => call(base, key, "POST", `/workflows/${manual.id}/runs`, { input: {} })));
  for (let i = 0; i < o.events; i += 1) await call(base, key, "POST", "/events", { type: "hog.fan", data: { i } });
}

/** ms from each run's creation to its end (the server's own times), for `n` runs, `parallel` at a time. */
export async function timedRuns(base: string, key: string, target: string, n: number, parallel: number): Promise<number[]> {
  const wf = await call(base, key, "POST", "/workflows", {
    name: "short",
    trigger: { type: "manual" },
    steps: [{ id: "call", type: "http", url: `${target}/short` }],
  });
  const took: number[] = [];
  let next = 0;
  const worker = async () => {
    while (next < n) {
      next += 1;
      const run = await call(base, key, "POST", `/workflows/${wf.id}/runs`, { input: {} });
      let ended: any;
      await waitFor(
        `run ${run.id} to end`,
        async () => {
          ended = await call(base, key, "GET", `/workflows/${wf.id}/runs/${run.id}`);
          return ended.status === "succeeded" || ended.status === "failed";
        },
        60_000,
      );
      if (ended.status !== "succeeded") throw new Error(`run ${run.id} ${ended.status}: ${JSON.stringify(ended.steps)}`);
      took.push(Date.parse(ended.finished_at) - Date.parse(ended.created_at));
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
  return took;
}

export function quantile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
}
