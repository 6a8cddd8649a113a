import { createServer, type IncomingHttpHeaders } from "node:http";
import { waitFor } from "../../tools/procs";
import { api, type Platform, type TestOrg } from "./platform";

/** One request an http step sent to the target. */
export interface StepRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * A real HTTP server on 127.0.0.1 for http steps: records every request, and answers as `answer`
 * says for the n-th one (by default 200 with the request echoed back as JSON: its headers and body,
 * so that what a step sent also lands in its stored output).
 */
export interface StepTarget {
  url: string;
  got: StepRequest[];
  answer: (n: number, req: StepRequest) => { status: number; json?: unknown };
  close(): Promise<void>;
}

export const echo = (_n: number, req: StepRequest) => ({ status: 200, json: { headers: req.headers, body: req.body } });

export async function startStepTarget(): Promise<StepTarget> {
  const target = { got: [] as StepRequest[], answer: echo } as StepTarget;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const got: StepRequest = {
        method: req.method ?? "",
        path: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks).toString(),
      };
      target.got.push(got);
      const { status, json } = target.answer(target.got.length, got);
      res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(json ?? {}));
    });
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  target.url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  target.close = async () => {
    server.closeAllConnections();
    await new Promise((ok) => server.close(ok));
  };
  return target;
}

/** A suite's step target: started before its tests, emptied and answering `echo` before each, closed after them. */
export function useStepTarget(): { readonly target: StepTarget } {
  let target: StepTarget | undefined;
  beforeAll(async () => {
    target = await startStepTarget();
  });
  afterAll(() => target?.close());
  beforeEach(() => {
    (target as StepTarget).got.length = 0;
    (target as StepTarget).answer = echo;
  });
  return {
    get target() {
      return target as StepTarget;
    },
  };
}

/** Creating workflows, starting runs and awaiting their end, through the API with one key. */
export function runsApi(baseUrl: () => string, key: () => string) {
  const call = (method: string, path: string, body?: unknown) => api(baseUrl(), method, path, { key: key(), body });
  return {
    call,
    async workflow(steps: unknown[]): Promise<{ id: string; signing_secret: string }> {
      const res = await call("POST", "/workflows", { name: "wf", trigger: { type: "manual" }, steps });
      expect(res.status).toBe(201);
      return res.body.data;
    },
    async start(workflowId: string, input: Record<string, unknown> = {}): Promise<string> {
      const res = await call("POST", `/workflows/${workflowId}/runs`, { input });
      expect(res.status).toBe(201);
      return res.body.data.id;
    },
    /** The run once it has ended, as GET answers it. */
    async ended(workflowId: string, runId: string): Promise<any> {
      let run: any;
      await waitFor(`run ${runId} to end`, async () => {
        run = (await call("GET", `/workflows/${workflowId}/runs/${runId}`)).body.data;
        return ["succeeded", "failed", "cancelled"].includes(run?.status);
      });
      return run;
    },
  };
}

/** runsApi with a usePlatform suite's Acme live key. */
export const acmeRuns = (suite: { p: Platform; acme: TestOrg }) =>
  runsApi(
    () => suite.p.baseUrl,
    () => suite.acme.live,
  );
