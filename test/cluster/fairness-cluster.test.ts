import { RUN_SHARES } from "../../services/workflows/runs.mixin";
import { hog, holdingServer, quantile, timedRuns, type HoldingServer } from "../helpers/fairness";
import { startStepTarget, type StepTarget } from "../helpers/steps";
import {
  clusterLogLevel,
  freePort,
  runCli,
  saveClusterLogs,
  startNats,
  startNode,
  tempDir,
  waitFor,
  waitForGateway,
  type NatsServer,
  type NodeProc,
} from "../helpers/cluster";
import { api } from "../helpers/platform";

/**
 * The fairness scenario of test/api/fairness.test.ts over real processes and a real nats-server:
 * a node with the API and two workflows nodes. One organization holds its share of both nodes'
 * slots with runs waiting on a server that does not answer; the other's runs finish within the
 * bound docs/security/fairness.md states.
 */
jest.setTimeout(180_000);

const P99_BOUND_MS = 1_000;
const WORKFLOWS_NODES = 2;

let nats: NatsServer;
let dir: { path: string; remove(): void };
const nodes: NodeProc[] = [];
let gw: string;
let slow: HoldingServer;
let target: StepTarget;

beforeAll(async () => {
  slow = await holdingServer();
  target = await startStepTarget();
  nats = await startNats();
  dir = tempDir();
  const common = {
    ...clusterLogLevel(),
    TRANSPORTER: nats.url,
    DATA_DIR: dir.path,
    WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
    RATE_LIMIT_MAX: "1000000",
    RUN_STARTS_PER_MINUTE: "100000",
  };
  const port = await freePort();
  nodes.push(startNode("api", { ...common, SERVICES: "gateway,auth,keys,orgs,events,webhooks", PORT: String(port) }));
  gw = `http://127.0.0.1:${port}/v1`;
  for (let i = 1; i <= WORKFLOWS_NODES; i += 1) nodes.push(startNode(`w${i}`, { ...common, SERVICES: "workflows" }));
});

afterAll(async () => {
  slow?.release();
  saveClusterLogs("fairness", nodes);
  await Promise.all(nodes.map((n) => n.kill("SIGKILL")));
  await nats?.stop();
  await target?.close();
  await slow?.close();
  dir?.remove();
});

const liveKey = (name: string) =>
  runCli(["orgs", "create", "--name", name], { DATA_DIR: dir.path }).api_keys.find((k) => k.environment === "live")!.key;

describe("the run engine's slots over NATS", () => {
  it("let another organization's runs finish within the bound while one holds its share of every node", async () => {
    let hogKey = "";
    await waitFor("the bootstrap CLI", () => {
      hogKey = liveKey("Hog");
      return true;
    });
    const otherKey = liveKey("Other");
    await waitForGateway(gw, hogKey);
    await waitFor("the workflows service", async () => (await api(gw, "GET", "/workflows", { key: hogKey })).status === 200);
    await hog(gw, hogKey, slow.url, { apiRuns: 200, listeners: 50, events: 10 });
    const share = RUN_SHARES.perEnvironment * WORKFLOWS_NODES;
    await waitFor("the hog to hold its share of both nodes", () => slow.held() >= share, 60_000);
    try {
      const took = await timedRuns(gw, otherKey, target.url, 100, 4);
      const p99 = quantile(took, 0.99);
      console.log(
        `fairness, ${WORKFLOWS_NODES} workflows nodes: the other organization's runs p50 ${quantile(took, 0.5)} ms, p99 ${p99} ms, ` +
          `max ${Math.max(...took)} ms (${took.length} runs; the hog held ${slow.most()} requests at most)`,
      );
      expect(slow.held()).toBe(share);
      expect(slow.most()).toBe(share);
      expect(p99).toBeLessThan(P99_BOUND_MS);
    } finally {
      slow.release();
    }
  });
});
