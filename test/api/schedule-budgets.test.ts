import { waitFor } from "../../tools/procs";
import { manualClock } from "../helpers/clock";
import { api, usePlatform } from "../helpers/platform";

// Two run starts a minute per environment, counted by the suite's clock (10 s past 12:00).
const clock = manualClock(Date.UTC(2026, 10, 26, 12, 0, 10));
const suite = usePlatform({ RUN_STARTS_PER_MINUTE: "2" }, { clock });
const iso = (ms: number) => new Date(ms).toISOString();
const at = (hh: number, mm: number, ss: number) => Date.UTC(2026, 10, 26, hh, mm, ss);

const call = (method: string, path: string, body: unknown, key: string) => api(suite.p.baseUrl, method, path, { key, body });

async function scheduled(key: string): Promise<string> {
  const res = await call(
    "POST",
    "/workflows",
    {
      name: "every ten seconds",
      trigger: { type: "schedule", every_ms: 10_000, overlap: "allow" },
      steps: [{ id: "noted", type: "set", output: 1 }],
    },
    key,
  );
  expect(res.status).toBe(201);
  return res.body.data.id;
}
async function ticksOf(id: string, key: string): Promise<string[]> {
  const res = await api(suite.p.baseUrl, "GET", `/workflows/${id}/runs?limit=100`, { key });
  return (res.body.data as { trigger: { scheduled_at: string } }[]).map((r) => r.trigger.scheduled_at).reverse();
}

describe("scheduled runs and RUN_STARTS_PER_MINUTE", () => {
  it("count against the environment's start budget: a tick that finds it spent waits for the next minute, in order", async () => {
    const live = suite.acme.live;
    const wf = await scheduled(live);
    // The other environment, with a budget of its own, ticks at the same times: the witness.
    const witness = await scheduled(suite.acme.test);
    const manual = await call(
      "POST",
      "/workflows",
      { name: "m", trigger: { type: "manual" }, steps: [{ id: "a", type: "set", output: 1 }] },
      live,
    );
    for (let i = 0; i < 2; i++) expect((await call("POST", `/workflows/${manual.body.data.id}/runs`, {}, live)).status).toBe(201);
    expect((await call("POST", `/workflows/${manual.body.data.id}/runs`, {}, live)).status).toBe(429);

    clock.set(at(12, 0, 30));
    await waitFor("the witness's two ticks", async () => (await ticksOf(witness, suite.acme.test)).length === 2);
    expect(await ticksOf(wf, live)).toEqual([]);
    const view = (await api(suite.p.baseUrl, "GET", `/workflows/${wf}`, { key: live })).body.data;
    expect(view.next_run_at).toBe(iso(at(12, 0, 20)));

    // A new minute, two starts: the two oldest ticks, late; the next minute, the two after them.
    clock.set(at(12, 1, 0));
    await waitFor("two late ticks", async () => (await ticksOf(wf, live)).length === 2);
    clock.set(at(12, 2, 0));
    await waitFor("two more", async () => (await ticksOf(wf, live)).length === 4);
    expect(await ticksOf(wf, live)).toEqual([iso(at(12, 0, 20)), iso(at(12, 0, 30)), iso(at(12, 0, 40)), iso(at(12, 0, 50))]);
  });
});
