import { createHmac } from "node:crypto";
import { Pool, type Dispatcher } from "undici";
import { api, expectError, usePlatform } from "../helpers/platform";

/**
 * Inbound webhooks under attack (issue 32): a hook is reachable by anyone, so a flood of forged
 * signatures must cost little, and spend the budgets of its address and of its hook, not the
 * platform's.
 */
const quantile = (values: number[], q: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
};

async function hookOf(baseUrl: string, key: string) {
  const res = await api(baseUrl, "POST", "/workflows", {
    key,
    body: { name: "flooded", trigger: { type: "webhook", verify: { scheme: "github" } }, steps: [{ type: "set", output: {} }] },
  });
  expect(res.status).toBe(201);
  return res.body.data as { id: string; hook: { url: string }; hook_secret: string };
}

describe("a flood of bad signatures", () => {
  const suite = usePlatform({ RATE_LIMIT_MAX: "10000000", RATE_LIMIT_ADDRESS_MAX: "100000000" });
  /** Senders at once, each sending its next request as soon as the last is answered. */
  const FLOODERS = 8;
  const SAMPLES = 150;
  /**
   * /health's median during the flood, over its median alone. One event loop serves the flood and the
   * probe (and, in this process, sends the flood too): each probe waits for about one request of each
   * sender, so the ratio is about FLOODERS × a refusal's cost over a probe's, and a refusal that
   * waited on the store or wrote to it multiplies it.
   */
  const IDLE_RATIO_MAX = 40;
  /** The same median during a flood of the cheapest refusal there is (no key: 401 before any work), same senders. */
  const KEYLESS_RATIO_MAX = 4;

  it("leaves /health's median within a bound of its idle figure, and stores nothing", async () => {
    const { p, acme } = suite;
    const origin = p.baseUrl.replace(/\/v1$/, "");
    const wf = await hookOf(p.baseUrl, acme.live);
    const probe = new Pool(origin, { connections: 1 });
    const health = async (n: number) => {
      const took: number[] = [];
      for (let i = 0; i < n; i++) {
        const at = performance.now();
        const res = await probe.request({ path: "/health", method: "GET" });
        await res.body.text();
        expect(res.statusCode).toBe(200);
        took.push(performance.now() - at);
      }
      return quantile(took, 0.5);
    };
    const body = JSON.stringify({ action: "opened", number: 1, padding: "x".repeat(2000) });
    const forged = `sha256=${createHmac("sha256", "not the secret").update(body).digest("hex")}`;
    const statuses = new Set<number>();
    /** /health's median while FLOODERS senders send `request` over and over; how many they sent. */
    const during = async (request: Dispatcher.RequestOptions) => {
      const flood = new Pool(origin, { connections: FLOODERS });
      let running = true;
      let sent = 0;
      const flooder = async () => {
        while (running) {
          const res = await flood.request(request);
          await res.body.text();
          statuses.add(res.statusCode);
          sent += 1;
        }
      };
      const flooders = Array.from({ length: FLOODERS }, flooder);
      const median = await health(SAMPLES);
      running = false;
      await Promise.all(flooders);
      await flood.close();
      return { median, sent };
    };
    await health(50); // warm-up
    const idle = await health(SAMPLES);
    const forgedFlood = {
      path: wf.hook.url,
      method: "POST",
      headers: { "content-type": "application/json", "x-hub-signature-256": forged },
      body,
    } as const;
    await during(forgedFlood); // warm-up
    // The two floods in turns, three rounds, so that a change in the machine's load meanwhile weighs on both alike.
    const rounds: { keyless: number; forged: number; sent: number }[] = [];
    for (let round = 0; round < 3; round++) {
      const k = await during({ path: "/v1/me", method: "GET" });
      const f = await during(forgedFlood);
      rounds.push({ keyless: k.median, forged: f.median, sent: f.sent });
    }
    const middle = (values: number[]) => [...values].sort((a, b) => a - b)[1];
    const keyless = { median: middle(rounds.map((r) => r.keyless)) };
    const attacked = { median: middle(rounds.map((r) => r.forged)), sent: Math.min(...rounds.map((r) => r.sent)) };
    await probe.close();
    console.log(
      `/health p50 (middle of 3 rounds): idle ${idle.toFixed(2)} ms; during forged requests ${attacked.median.toFixed(2)} ms ` +
        `(×${(attacked.median / idle).toFixed(1)}); during keyless ones ${keyless.median.toFixed(2)} ms; rounds ${JSON.stringify(rounds)}`,
    );
    expect([...statuses]).toEqual([401]);
    expect(attacked.sent).toBeGreaterThan(SAMPLES);
    expect(attacked.median / idle).toBeLessThan(IDLE_RATIO_MAX);
    expect(attacked.median / keyless.median).toBeLessThan(KEYLESS_RATIO_MAX);
    const runs = await api(p.baseUrl, "GET", `/workflows/${wf.id}/runs`, { key: acme.live });
    expect(runs.body.data).toEqual([]);
  });
});

describe("the budgets of an address and of a hook", () => {
  const suite = usePlatform({ RATE_LIMIT_MAX: "5", RATE_LIMIT_WINDOW_MS: "60000", RATE_LIMIT_ADDRESS_MAX: "1000", TRUST_PROXY: "true" });

  it("answers 429 to an address past a key's budget of refusals, while another address still gets through", async () => {
    const { p, acme } = suite;
    const wf = await hookOf(p.baseUrl, acme.live);
    const path = wf.hook.url.replace(/^\/v1/, "");
    const body = "{}";
    const forged = { "content-type": "application/json", "x-hub-signature-256": `sha256=${"0".repeat(64)}` };
    const from = (address: string) => ({ ...forged, "x-forwarded-for": address });
    for (let i = 0; i < 5; i++)
      expectError(await api(p.baseUrl, "POST", path, { raw: body, headers: from("198.51.100.1") }), 401, "invalid_signature");
    const limited = await api(p.baseUrl, "POST", path, { raw: body, headers: from("198.51.100.1") });
    expectError(limited, 429, "rate_limited");
    expect(Number(limited.headers["retry-after"])).toBeGreaterThan(0);
    expectError(await api(p.baseUrl, "POST", path, { raw: body, headers: from("198.51.100.2") }), 401, "invalid_signature");
  });

  it("counts made-up hook ids against the address's refusals, as unknown keys are", async () => {
    const { p } = suite;
    const from = { "content-type": "application/json", "x-forwarded-for": "198.51.100.9" };
    const madeUp = (i: number) => `/hooks/hk_${String(i).padStart(32, "A")}`;
    for (let i = 0; i < 5; i++)
      expectError(await api(p.baseUrl, "POST", madeUp(i), { raw: "{}", headers: from }), 404, "resource_not_found", "hook_id");
    expectError(await api(p.baseUrl, "POST", madeUp(5), { raw: "{}", headers: from }), 429, "rate_limited");
  });

  it("answers 429 past the hook's own budget, which only verified requests spend", async () => {
    const { p, globex } = suite;
    const wf = await hookOf(p.baseUrl, globex.live);
    const path = wf.hook.url.replace(/^\/v1/, "");
    const body = "{}";
    const signed = {
      "content-type": "application/json",
      "x-hub-signature-256": `sha256=${createHmac("sha256", wf.hook_secret).update(body).digest("hex")}`,
    };
    const from = { "x-forwarded-for": "203.0.113.7" };
    const answers = [];
    for (let i = 0; i < 6; i++) answers.push((await api(p.baseUrl, "POST", path, { raw: body, headers: { ...signed, ...from } })).status);
    expect(answers).toEqual([202, 202, 202, 202, 202, 429]);
  });
});
