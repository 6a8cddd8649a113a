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
import { DELIVERIES, type DeliveryDoc } from "../shared/deliveries";
import { newId } from "../shared/ids";
import { SqliteStore } from "../shared/storage/sqlite";
import { openCollection } from "../shared/storage/types";
import { deliveryId } from "../services/webhook-dispatcher/dispatcher.logic";
import { cpuMs } from "./lib";

const ROWS = Number(process.env.BENCH_ROWS ?? 40_000);
const PER_TURN = Number(process.env.BENCH_PER_TURN ?? 25);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const WEBHOOK = "wh_01jdx3aaaaaaaaaaaaaaaaaaaa";
const BODY = JSON.stringify({ id: "evt_x", type: "bench.test", created_at: new Date().toISOString(), data: { sent: 1732440000000.5 } });

/** A delivery as the dispatcher stores it after a first attempt answered 200. */
function delivery(eventId: string): DeliveryDoc {
  const at = new Date().toISOString();
  return {
    id: deliveryId(eventId, WEBHOOK),
    org_id: "org_01jdx3bbbbbbbbbbbbbbbbbbbb",
    environment: "live",
    webhook_id: WEBHOOK,
    event_id: eventId,
    event_type: "bench.test",
    status: "succeeded",
    series_start: 0,
    next_attempt_at: null,
    created_at: at,
    updated_at: at,
    attempts: [
      {
        number: 1,
        at,
        status_code: 200,
        duration_ms: 1.2,
        error: null,
        request: {
          method: "POST",
          url: "http://127.0.0.1:4000/hook",
          headers: {
            "content-type": "application/json",
            "webhook-id": "del_01jdx3cccccccccccccccccccc",
            "webhook-timestamp": "1732440000",
            "webhook-signature": "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=",
          },
          body_bytes: Buffer.byteLength(BODY),
        },
        response: {
          headers: { "content-length": "0", date: new Date().toUTCString(), connection: "keep-alive", "keep-alive": "timeout=5" },
          body: "",
          body_encoding: "utf8",
          body_bytes: 0,
          body_truncated: false,
        },
      },
    ],
  };
}

/** One writer (a child process): inserts `rows` deliveries, PER_TURN per turn; prints its CPU µs per row. */
async function writer(dir: string, rows: number): Promise<void> {
  const store = new SqliteStore(dir);
  const deliveries = openCollection(store, DELIVERIES);
  const events = Array.from({ length: rows }, () => newId("evt"));
  const cpu = cpuMs(process.pid);
  for (let i = 0; i < rows; i += PER_TURN) await Promise.all(events.slice(i, i + PER_TURN).map((e) => deliveries.insert(delivery(e))));
  const used = cpuMs(process.pid) - cpu;
  await store.close();
  process.stdout.write(JSON.stringify({ cpuUsPerRow: (used * 1000) / rows }));
}

/** ROWS rows split among `writers` processes on one fresh file: each one's CPU per row, and rows/s. */
async function measure(writers: number): Promise<{ cpu: number[]; rate: number }> {
  const dir = mkdtempSync(join(tmpdir(), "wfp-writers-"));
  try {
    // The table and its indexes exist before the writers start.
    const setup = new SqliteStore(dir);
    openCollection(setup, DELIVERIES);
    await setup.close();
    const start = performance.now();
    const results = await Promise.all(
      Array.from(
        { length: writers },
        () =>
          new Promise<{ cpuUsPerRow: number }>((ok, fail) => {
            const child = spawn(process.execPath, [__filename, "writer", dir, String(ROWS / writers)], {
              stdio: ["ignore", "pipe", "inherit"],
            });
            let out = "";
            child.stdout.on("data", (d) => (out += d));
            child.once("exit", (code) => (code === 0 ? ok(JSON.parse(out)) : fail(new Error(`writer exited with ${String(code)}`))));
          }),
      ),
    );
    return { cpu: results.map((r) => r.cpuUsPerRow), rate: Math.round(ROWS / ((performance.now() - start) / 1000)) };
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
