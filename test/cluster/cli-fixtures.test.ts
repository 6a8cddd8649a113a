import { cliRun } from "../../tools/procs";
import { waitFor, type NodeProc, startCliServer } from "../helpers/cluster";
import { api } from "../helpers/platform";
import { startReceiver, type Receiver } from "../helpers/receiver";

/**
 * The CLI's `trigger` fixtures for system types, and `events resend` / `deliveries redeliver`, as
 * processes against a server process: each fixture's events are stored and its resources are gone.
 */
jest.setTimeout(120_000);

let dir: { path: string; remove(): void };
let server: NodeProc;
let rx: Receiver;
let gw: string;
let env: Record<string, string>;
let key: string;

beforeAll(async () => {
  rx = await startReceiver();
  ({ dir, server, gw, key, env } = await startCliServer("cli-fixtures", "Fixtures Co", { WEBHOOK_ALLOW_PRIVATE_TARGETS: "true" }));
});

afterAll(async () => {
  await server?.kill();
  await rx?.close();
  dir?.remove();
});

const get = async (path: string) => (await api(gw, "GET", path, { key })).body;
/** The stored events of `type` whose data names `field: value`. */
const eventsOf = async (type: string, field: string, value: string) =>
  (await get(`/events?type=${type}&per_page=100`)).data.filter((e: any) => e.data[field] === value);

describe("trigger fixtures", () => {
  it("workflow.completed: a one-step workflow runs to its end and is deleted", async () => {
    const res = cliRun(["trigger", "workflow.completed", "--json"], env);
    expect({ status: res.status, stderr: res.stderr }).toEqual({ status: 0, stderr: "" });
    const ran = JSON.parse(res.stdout);
    expect(ran).toMatchObject({ fixture: true, type: "workflow.completed", workflow_id: expect.stringMatching(/^wf_/) });
    const completed = await eventsOf("workflow.completed", "run_id", ran.run_id);
    expect(completed.map((e: any) => e.data.status)).toEqual(["succeeded"]);
    expect(await eventsOf("workflow.deleted", "workflow_id", ran.workflow_id)).toHaveLength(1);
    expect((await api(gw, "GET", `/workflows/${ran.workflow_id}`, { key })).status).toBe(404);

    const human = cliRun(["trigger", "workflow.deleted"], env);
    expect(human.stdout).toMatch(
      /^workflow\.deleted: fixture ran \(workflow wf_\w+ 'cli trigger fixture' ran \(succeeded\) and was deleted: /,
    );
  });

  it("approval.requested: a run asks an approval, the fixture rejects it and deletes the workflow", async () => {
    const res = cliRun(["trigger", "approval.requested", "--json"], env);
    expect({ status: res.status, stderr: res.stderr }).toEqual({ status: 0, stderr: "" });
    const ran = JSON.parse(res.stdout);
    const [asked] = await eventsOf("approval.requested", "run_id", ran.run_id);
    expect(asked.data).toMatchObject({
      workflow_id: ran.workflow_id,
      step_id: "approve",
      message: "Approval asked by the CLI's trigger fixture",
    });
    const [decided] = await eventsOf("approval.decided", "run_id", ran.run_id);
    expect(decided.data).toMatchObject({ decision: "rejected", comment: "cli trigger fixture" });
    expect((await eventsOf("workflow.completed", "run_id", ran.run_id)).map((e: any) => e.data.status)).toEqual(["failed"]);
    expect((await api(gw, "GET", `/workflows/${ran.workflow_id}`, { key })).status).toBe(404);
  });

  it("webhook.deleted: a webhook on a type nothing emits, created and deleted", async () => {
    const ran = JSON.parse(cliRun(["trigger", "webhook.deleted", "--json"], env).stdout);
    expect(await eventsOf("webhook.deleted", "webhook_id", ran.webhook_id)).toHaveLength(1);
    expect((await api(gw, "GET", `/webhooks/${ran.webhook_id}`, { key })).status).toBe(404);
  });

  it("refuses a system type no API call can cause, naming the fixtures", () => {
    const refused = cliRun(["trigger", "webhook.disabled"], env);
    expect(refused.status).toBe(2);
    expect(refused.stderr).toContain(
      "'webhook.disabled' is a system type with no fixture; fixtures: api_key.created, api_key.revoked, workflow.completed, workflow.deleted, approval.requested, approval.decided, webhook.deleted",
    );
  });
});

describe("sending again", () => {
  it("events resend redelivers an event to each webhook; deliveries redeliver sends one", async () => {
    const hooks: string[] = [];
    for (const path of ["/a", "/b"]) {
      const made = JSON.parse(cliRun(["webhooks", "create", "--url", rx.url(path), "--events", "parcel.sent", "--json"], env).stdout);
      rx.setSecret(path, made.secret);
      hooks.push(made.id);
    }
    const { event } = JSON.parse(cliRun(["trigger", "parcel.sent", "--data", '{"parcel":"p_1"}', "--json"], env).stdout);
    await rx.waitFor(() => rx.byPath("/a").length === 1 && rx.byPath("/b").length === 1);
    await waitFor("both deliveries to end", async () =>
      (await get(`/events/${event.id}/deliveries`)).data.every((d: any) => d.status === "succeeded"),
    );

    const both = cliRun(["events", "resend", event.id], env);
    expect(both.status).toBe(0);
    expect(both.stdout.trim().split("\n").sort()).toEqual(
      expect.arrayContaining([expect.stringMatching(new RegExp(`^redelivered del_\\w+ to ${hooks[0]} \\(parcel\\.sent\\): `))]),
    );
    expect(both.stdout.trim().split("\n")).toHaveLength(2);
    await rx.waitFor(() => rx.byPath("/a").length === 2 && rx.byPath("/b").length === 2);
    expect(rx.byPath("/a")[1]!.json).toEqual(rx.byPath("/a")[0]!.json);
    expect(rx.byPath("/a")[1]!.verified).toBe(true);

    const one = cliRun(["events", "resend", event.id, "--webhook", hooks[1]!, "--json"], env);
    expect(JSON.parse(one.stdout)).toMatchObject({ action: "redeliver", delivery: { webhook_id: hooks[1], event_id: event.id } });
    await rx.waitFor(() => rx.byPath("/b").length === 3);
    expect(rx.byPath("/a")).toHaveLength(2);

    const delivery = (await get(`/events/${event.id}/deliveries`)).data.find((d: any) => d.webhook_id === hooks[0]);
    await waitFor(
      "the first webhook's redelivery to end",
      async () => (await get(`/webhooks/${hooks[0]}/deliveries/${delivery.id}`)).data.status !== "pending",
    );
    const single = cliRun(["deliveries", "redeliver", hooks[0]!, delivery.id], env);
    expect(single.stdout).toMatch(new RegExp(`^redelivered ${delivery.id} to ${hooks[0]} \\(parcel\\.sent\\): `));
    await rx.waitFor(() => rx.byPath("/a").length === 3);

    const none = cliRun(["events", "resend", event.id, "--webhook", "wh_01jdx3kq9v7c2m5n8p4r6t0w1y"], env);
    expect({ status: none.status, stderr: none.stderr.trim() }).toEqual({
      status: 1,
      stderr: `warning: no delivery of ${event.id} to wh_01jdx3kq9v7c2m5n8p4r6t0w1y`,
    });
    expect(cliRun(["deliveries", "redeliver", hooks[0]!, "del_01jdx3kq9v7c2m5n8p4r6t0w1y"], env).status).toBe(1);
  });
});
