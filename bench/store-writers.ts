/**
 * What a second writing process costs the embedded store: the same number of delivery rows (the
 * dispatcher's documents, with an attempt's captured request and response, into the delivery log's
 * table and its indexes) inserted by one process, then by two processes sharing the file, each
 * committing BENCH_PER_TURN rows per transaction as the dispatcher's group commit does. Prints each
 * writer's CPU µs per row (from /proc, all its threads: the checkpoint thread too) and the rows/s of
 * all writers together; the two set-ups alternate BENCH_ROUNDS times.
 *
 *   npm run build && node dist/bench/store-writers.js      (BENCH_ROWS=40000 BENCH_PER_TURN=25 BENCH_ROUNDS=3)
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { requestOf, responseOf } from "../services/webhook-dispatcher/capture";
import { freshDelivery, outcomeOf, settledDelivery } from "../services/webhook-dispatcher/dispatcher.logic";
import { DELIVERIES, type Attempt, type DeliveryDoc } from "../shared/records/deliveries";
import { newId } from "../shared/ids";
import { deliveryHeaders } from "../shared/net/signing";
import { SqliteStore } from "../shared/storage/sqlite";
import { openCollection } from "../shared/storage/types";
import { cpuMs } from "./lib";

const ROWS = Number(process.env.BENCH_ROWS ?? 40_000);
const PER_TURN = Number(process.env.BENCH_PER_TURN ?? 25);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const TENANT = { org_id: "org_bench", environment: "live" } as const;
const SECRETS = ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"];

/**
 * A delivery as the dispatcher stores it after a first attempt answered 200: built by its own
 * functions, with the signed request and the answer captured as an attempt keeps them.
 */
function delivery(eventId: string): DeliveryDoc {
  const at = new Date().toISOString();
  const fresh = freshDelivery(TENANT, { id: eventId, type: "bench.test" }, "wh_bench", at);
  const body = JSON.stringify({ id: eventId, type: "bench.test", created_at: at, data: { sent: Date.now() } });
  const headers = deliveryHeaders(fresh, body, SECRETS);
  const attempt: Attempt = {
    number: 1,
    at,
    status_code: 200,
    duration_ms: 1.2,
    error: null,
    request: requestOf("http://127.0.0.1:4000/hook", headers, body),
    response: responseOf({ "content-length": "0", date: new Date().toUTCString(), connection: "keep-alive" }, Buffer.alloc(0), 0),
  };
  const now = Date.now();
  return settledDelivery(fresh, outcomeOf(fresh, attempt, [], now), attempt, now);
}

/** What a writer reports: its CPU per row, and when (epoch ms) its inserts began and ended. */
interface Written {
  cpuUsPerRow: number;
  start: number;
  end: number;
}

/** One writer (a child process): inserts `rows` deliveries, PER_TURN per turn; prints its CPU µs per row of that. */
async function writer(dir: string, rows: number): Promise<void> {
  const store = new SqliteStore(dir);
  const deliveries = openCollection(store, DELIVERIES);
  // Built (and signed) before the clock starts: the figure is the store's work alone.
  const docs = Array.from({ length: rows }, () => delivery(newId("evt")));
  const cpu = cpuMs(process.pid);
  const start = Date.now();
  for (let i = 0; i < rows; i += PER_TURN) await Promise.all(docs.slice(i, i + PER_TURN).map((doc) => deliveries.insert(doc)));
  const result: Written = { cpuUsPerRow: ((cpuMs(process.pid) - cpu) * 1000) / rows, start, end: Date.now() };
  await store.close();
  process.stdout.write(JSON.stringify(result));
}

/** ROWS rows split among `writers` processes on one fresh file: each one's CPU per row, and rows/s. */
async function measure(writers: number): Promise<{ cpu: number[]; rate: number }> {
  const dir = mkdtempSync(join(tmpdir(), "wfp-writers-"));
  try {
    // The table and its indexes exist before the writers start.
    const setup = new SqliteStore(dir);
    openCollection(setup, DELIVERIES);
    await setup.close();
    const results = await Promise.all(
      Array.from(
        { length: writers },
        () =>
          new Promise<Written>((ok, fail) => {
            const child = spawn(process.execPath, [__filename, "writer", dir, String(ROWS / writers)], {
              stdio: ["ignore", "pipe", "inherit"],
            });
            let out = "";
            child.stdout.on("data", (d) => (out += d));
            child.once("exit", (code) => (code === 0 ? ok(JSON.parse(out)) : fail(new Error(`writer exited with ${String(code)}`))));
          }),
      ),
    );
    // From the first writer's first insert to the last one's last (each builds its rows before).
    const ms = Math.max(...results.map((r) => r.end)) - Math.min(...results.map((r) => r.start));
    return { cpu: results.map((r) => r.cpuUsPerRow), rate: Math.round(ROWS / (ms / 1000)) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  console.log(`${ROWS} delivery rows, ${PER_TURN} per transaction; CPU µs per row of each writer, rows/s of all`);
  for (let round = 1; round <= ROUNDS; round += 1) {
    const one = await measure(1);
    const two = await measure(2);
    const mean = two.cpu.reduce((a, b) => a + b, 0) / two.cpu.length;
    console.log(
      `round ${round}: one writer ${one.cpu[0].toFixed(1)} µs/row, ${one.rate}/s; two writers ${two.cpu.map((c) => c.toFixed(1)).join(" + ")} µs/row, ${two.rate}/s; CPU per row ${(mean / one.cpu[0]).toFixed(2)}x, rows/s ${(two.rate / one.rate).toFixed(2)}x`,
    );
  }
}

if (process.argv[2] === "writer") {
  writer(process.argv[3], Number(process.argv[4])).catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
} else {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
