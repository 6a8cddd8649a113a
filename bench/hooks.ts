/**
 * Inbound webhooks (POST /v1/hooks/{hook_id}) against POST /v1/events, the whole platform in one
 * process, the same payload each time and the same run (a one-step workflow):
 *   events    — events/s accepted by `POST /events` (each starts a run of an event-triggered workflow)
 *   inbound   — requests/s accepted (202) by a Standard Webhooks hook that dedupes by `webhook-id`,
 *               each request signed by the client with its own id (each starts a run)
 *   refusals  — requests/s refused 401 with a forged signature, and the server's CPU µs per refusal,
 *               beside the cheapest refusal there is: `GET /v1/me` without a key (401 before any work)
 * Clients send as fast as BENCH_CLIENTS connections can (autocannon), BENCH_SECONDS each.
 *
 *   npm run bench:hooks        (BENCH_SECONDS=10 BENCH_CLIENTS=32; BENCH_PROF=<dir>: a CPU profile of the node)
 */
import { createHmac, randomUUID } from "node:crypto";
import autocannon from "autocannon";
import { runCli } from "../tools/procs";
import { cpuMs, flood, post, storeNode, Teardown } from "./lib";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CLIENTS = Number(process.env.BENCH_CLIENTS ?? 32);
const PROF = process.env.BENCH_PROF;
const COMMON = {
  RATE_LIMIT_MAX: "10000000",
  RATE_LIMIT_ADDRESS_MAX: "100000000",
  RUN_STARTS_PER_MINUTE: "10000000",
  LOG_LEVEL: "warn",
  ...(PROF && { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${PROF}` }),
};
const PAYLOAD = { type: "invoice.paid", data: { invoice: "in_1", amount: 1250, currency: "eur", customer: "cus_42" } };
const STEPS = [{ id: "shape", type: "set", output: { amount: "{{ input.event.data.amount }}" } }];

/** Answers to a generated request stream: counts by status, and requests/s of the expected one. */
async function cannon(opts: autocannon.Options, expected: number) {
  const result = await autocannon({ connections: CLIENTS, duration: SECONDS, ...opts });
  const got = expected === 401 ? result["4xx"] : result["2xx"];
  const other = result.requests.sent - got;
  if (result.errors + result.timeouts > 0 || other > CLIENTS)
    throw new Error(`${other} answers other than ${expected} of ${result.requests.sent}`);
  return { count: got, rps: Math.round(got / (result.duration || 1)) };
}

async function main(): Promise<void> {
  const t = new Teardown();
  try {
    const { dir, node, base } = await storeNode(t, "single", COMMON, undefined);
    const origin = base.replace(/\/v1$/, "");
    const admin = runCli(["orgs", "create", "--name", "Bench"], { DATA_DIR: dir }).api_keys[0].key;
    const hook = await post(`${base}/workflows`, admin, {
      name: "inbound",
      trigger: { type: "webhook", verify: { scheme: "standard_webhooks" }, dedupe: { header: "webhook-id" } },
      steps: [{ id: "shape", type: "set", output: { amount: "{{ input.request.body.data.amount }}" } }],
    });
    await post(`${base}/workflows`, admin, { name: "events", trigger: { type: "event", event_type: "invoice.paid" }, steps: STEPS });
    const secret = Buffer.from((hook.body.data.hook_secret as string).slice("whsec_".length), "base64");
    const hookUrl = `${origin}${hook.body.data.hook.url as string}`;
    const raw = JSON.stringify(PAYLOAD);

    // Warm-up of both paths, then each measured alone.
    await flood(`${base}/events`, admin, () => PAYLOAD, { amount: 2000, connections: CLIENTS });
    const events = await flood(`${base}/events`, admin, () => PAYLOAD, { duration: SECONDS, connections: CLIENTS });
    const signed = () => {
      const id = `msg_${randomUUID()}`;
      const ts = Math.floor(Date.now() / 1000);
      const sig = createHmac("sha256", secret).update(`${id}.${ts}.${raw}`).digest("base64");
      return { "content-type": "application/json", "webhook-id": id, "webhook-timestamp": String(ts), "webhook-signature": `v1,${sig}` };
    };
    const inbound = await cannon(
      { url: hookUrl, method: "POST", body: raw, requests: [{ setupRequest: (req) => ({ ...req, headers: signed() }) }] },
      202,
    );

    const forgedHeaders = { ...signed(), "webhook-signature": `v1,${createHmac("sha256", "forged").update(raw).digest("base64")}` };
    const cpuBefore = cpuMs(node.child.pid!);
    const refused = await cannon({ url: hookUrl, method: "POST", body: raw, headers: forgedHeaders }, 401);
    const refusalCpuUs = ((cpuMs(node.child.pid!) - cpuBefore) * 1000) / refused.count;
    const keylessBefore = cpuMs(node.child.pid!);
    const keyless = await cannon({ url: `${base}/me`, method: "GET" }, 401);
    const keylessCpuUs = ((cpuMs(node.child.pid!) - keylessBefore) * 1000) / keyless.count;

    console.log(`hooks bench, one process, ${CLIENTS} clients, ${SECONDS} s each, payload ${raw.length} bytes`);
    console.log(`| path | requests/s | server CPU µs per request |`);
    console.log(`|---|---|---|`);
    console.log(`| POST /v1/events (starts a run) | ${events.rps} | |`);
    console.log(`| POST /v1/hooks/{id}, signed (starts a run) | ${inbound.rps} | |`);
    console.log(`| POST /v1/hooks/{id}, forged signature (401) | ${refused.rps} | ${refusalCpuUs.toFixed(0)} |`);
    console.log(`| GET /v1/me without a key (401) | ${keyless.rps} | ${keylessCpuUs.toFixed(0)} |`);
    console.log(
      `inbound / events: ${(inbound.rps / events.rps).toFixed(2)}; forged refusal / keyless refusal CPU: ${(refusalCpuUs / keylessCpuUs).toFixed(2)}`,
    );
  } finally {
    await t.unwind();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
