import { api } from "../helpers/platform";
import {
  saveClusterLogs,
  waitFor,
  type NatsServer,
  type NodeProc,
  startApiCluster,
  startWorkflowsNode,
  type ApiCluster,
} from "../helpers/cluster";

/**
 * Child runs across real processes over a real nats-server: a child that ends while a workflows
 * node is dead resumes its parent on the other node, and parents whose nodes are killed while they
 * start their children start each child once.
 */
jest.setTimeout(120_000);

let cluster: ApiCluster;
let nats: NatsServer;
let dir: { path: string; remove(): void };
const nodes: NodeProc[] = [];
let gw: string;
let admin: string;

beforeAll(async () => {
  cluster = await startApiCluster(nodes, "Child Co");
  ({ nats, dir, gw, admin } = cluster);
});

afterAll(async () => {
  saveClusterLogs("child-runs", nodes);
  await Promise.all(nodes.map((n) => n.kill("SIGKILL")));
  await nats?.stop();
  dir?.remove();
});

const workflowsNode = (name: string): Promise<NodeProc> => startWorkflowsNode(cluster, nodes, name);
async function create(steps: unknown[], extra: Record<string, unknown> = {}) {
  const res = await api(gw, "POST", "/workflows", { key: admin, body: { name: "wf", trigger: { type: "manual" }, steps, ...extra } });
  expect(res.status).toBe(201);
  return res.body.data.id as string;
}
async function runOf(wf: string, run: string) {
  let res = await api(gw, "GET", `/workflows/${wf}/runs/${run}`, { key: admin });
  for (let tries = 0; res.status !== 200 && tries < 40; tries += 1)
    res = await api(gw, "GET", `/workflows/${wf}/runs/${run}`, { key: admin });
  expect(res.status).toBe(200);
  return res.body.data;
}
async function childrenOf(run: string): Promise<any[]> {
  const res = await api(gw, "GET", `/runs?parent_run_id=${run}&per_page=100`, { key: admin });
  return res.status === 200 ? res.body.data : [];
}
const ended = (wf: string, run: string) =>
  waitFor(`run ${run} to end`, async () => ["succeeded", "failed", "cancelled"].includes((await runOf(wf, run)).status), 60_000);

describe("child runs under SIGKILL", () => {
  it("a child that ends while its parent's node is dead resumes the parent on the other node", async () => {
    // w1 alone drives the parent and its child to their waits: the parent's node is w1.
    const w1 = await workflowsNode("w1");
    const child = await create([{ id: "ok", type: "approval" }], { output: { approved: "{{ steps.ok.output.approved }}" } });
    const parent = await create([
      { id: "ask", type: "run_workflow", workflow_id: child },
      { id: "after", type: "set", output: "{{ steps.ask.output.output.approved }}" },
    ]);
    const run = (await api(gw, "POST", `/workflows/${parent}/runs`, { key: admin, body: {} })).body.data.id as string;
    let kid: any;
    await waitFor("the child to wait for approval", async () => {
      kid = (await childrenOf(run))[0];
      return kid?.status === "waiting" && (await runOf(parent, run)).status === "waiting";
    });
    await workflowsNode("w2");
    await w1.kill("SIGKILL");
    // The approval goes to the node left; the child ends there and its end makes the parent due.
    await waitFor(
      "the approval",
      async () => (await api(gw, "POST", `/workflows/${child}/runs/${kid.id}/approve`, { key: admin })).status === 200,
    );
    await ended(parent, run);
    const done = await runOf(parent, run);
    expect(done.status).toBe("succeeded");
    expect(done.steps[0].output).toEqual({ run_id: kid.id, status: "succeeded", output: { approved: true } });
    expect(done.output).toBe(true);
    expect((await childrenOf(run)).map((r) => r.id)).toEqual([kid.id]);
  });

  it("a parent cancelled just before its node is killed still cancels its child, once a node runs", async () => {
    // w5 alone: the node that stores the cancellation is the one killed.
    await Promise.all(nodes.filter((n) => n.name !== "api").map((n) => n.kill("SIGKILL")));
    const only = await workflowsNode("w5");
    const child = await create([{ id: "ok", type: "approval" }]);
    const parent = await create([{ id: "ask", type: "run_workflow", workflow_id: child }]);
    const run = (await api(gw, "POST", `/workflows/${parent}/runs`, { key: admin, body: {} })).body.data.id as string;
    let kid: any;
    await waitFor("the child to wait", async () => {
      kid = (await childrenOf(run))[0];
      return kid?.status === "waiting" && (await runOf(parent, run)).status === "waiting";
    });
    expect((await api(gw, "POST", `/workflows/${parent}/runs/${run}/cancel`, { key: admin })).status).toBe(200);
    // The cancellation is stored; carrying it to the child is the engine's, on whatever node runs next.
    await only.kill("SIGKILL");
    await workflowsNode("w6");
    await ended(child, kid.id);
    expect(await runOf(child, kid.id)).toMatchObject({ status: "cancelled", cancel_reason: "parent_ended" });
    expect((await runOf(parent, run)).status).toBe("cancelled");
  });

  it("parents whose nodes are killed while they start children start each child once, and finish on a new node", async () => {
    const leaf = await create([{ id: "nap", type: "delay", duration_ms: 300 }], { output: "{{ input.n }}" });
    const steps = Array.from({ length: 12 }, (_, n) => ({
      id: `c${n}`,
      type: "run_workflow",
      workflow_id: leaf,
      input: { n },
      wait: n % 2 === 0,
    }));
    const parent = await create(steps, { output: "{{ steps.c10.output.output }}" });
    const runs = await Promise.all(
      [1, 2, 3].map(async () => (await api(gw, "POST", `/workflows/${parent}/runs`, { key: admin, body: {} })).body.data.id as string),
    );
    await waitFor("children started", async () => (await childrenOf(runs[0])).length >= 3, 30_000);
    await Promise.all(nodes.filter((n) => n.name !== "api").map((n) => n.kill("SIGKILL")));
    await workflowsNode("w3");
    for (const run of runs) {
      await ended(parent, run);
      const done = await runOf(parent, run);
      expect(done.status).toBe("succeeded");
      expect(done.output).toBe(10);
      const children = await childrenOf(run);
      // One child per step, none twice, each the one its step names.
      expect(children.map((c) => c.parent.step_id).sort()).toEqual(steps.map((s) => s.id).sort());
      for (const [i, step] of done.steps.entries()) {
        const mine = children.find((c) => c.parent.step_id === step.id);
        expect(step.output.run_id).toBe(mine.id);
        expect(mine.input).toEqual({ n: i });
      }
      await waitFor(`run ${run}'s children to end`, async () => (await childrenOf(run)).every((c) => c.status === "succeeded"), 30_000);
    }
  });
});
