/**
 * How the gateway should hold its HTTP server (docs/decisions/0020-gateway-http-server.md): the same
 * authenticated `GET /v1/me` served three ways, each in its own process, in one run:
 *   bare        — node:http answering the same JSON (the baseline)
 *   web-hooks   — moleculer-web: an alias route with its hooks (authenticate, authorize,
 *                 onBeforeCall, onAfterCall, onError) doing the gateway's work in small
 *   own-server  — node:http with the same work written as plain calls (the gateway's way)
 * Both Moleculer ways look the key up in a Map, check a scope, call a local action through the
 * broker and wrap its answer in `{data}` with a Request-Id header. Bare runs first and again last;
 * the others alternate twice; every ratio is to bare's mean.
 *
 *   npm run build && node dist/bench/gateway-server.js        (BENCH_SECONDS=5 BENCH_CONNECTIONS=20)
 */
import { spawn } from "node:child_process";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import autocannon from "autocannon";
import { ServiceBroker, Errors, type Context } from "moleculer";
import ApiGateway from "moleculer-web";
import { request } from "undici";
import { freePort, waitFor, type Proc } from "../tools/procs";
import { mean } from "./lib";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 20);
const KEY = "svc_test_bench";
const IDENTITY = { key_id: "key_bench", org_id: "org_bench", environment: "test", scopes: ["org:admin"] };
const IDENTITIES = new Map([[KEY, IDENTITY]]);
const ME = { ...IDENTITY, object: "identity", key_name: "bench", api_version: "2026-11-01" };
const KINDS = ["bare", "web-hooks", "own-server"] as const;
type Kind = (typeof KINDS)[number];

let requests = 0;
const requestId = () => `req_${(requests += 1).toString(36).padStart(12, "0")}`;
const bearer = (req: IncomingMessage) => /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? "")?.[1];

function meService(broker: ServiceBroker): void {
  broker.createService({
    name: "me",
    actions: { get: (ctx: Context<unknown, { auth: typeof IDENTITY }>) => ({ ...ME, key_id: ctx.meta.auth.key_id }) },
  });
}

async function serve(kind: Kind, port: number): Promise<void> {
  if (kind === "bare") {
    const payload = JSON.stringify({ data: ME });
    createServer((_req, res) => {
      res.writeHead(200, {
        "content-type": "application/json; charset=utf-8",
        "content-length": Buffer.byteLength(payload),
        "request-id": requestId(),
      });
      res.end(payload);
    }).listen(port, "127.0.0.1");
    return;
  }
  const broker = new ServiceBroker({ nodeID: `bench-${kind}`, logger: false });
  meService(broker);
  if (kind === "web-hooks") {
    broker.createService({
      name: "api",
      mixins: [ApiGateway],
      settings: {
        port,
        ip: "127.0.0.1",
        logRequest: null,
        logResponse: null,
        routes: [
          {
            path: "/v1",
            mappingPolicy: "restrict",
            authentication: true,
            authorization: true,
            bodyParsers: { json: true },
            aliases: { "GET me": "me.get" },
            onBeforeCall(ctx: Context<unknown, Record<string, unknown>>) {
              ctx.meta.request_id = requestId();
            },
            onAfterCall(
              ctx: Context<unknown, Record<string, unknown>>,
              _route: unknown,
              _req: IncomingMessage,
              res: ServerResponse,
              data: unknown,
            ) {
              res.setHeader("Request-Id", String(ctx.meta.request_id));
              return { data };
            },
            onError(_req: IncomingMessage, res: ServerResponse, err: { code?: number; message: string }) {
              res.writeHead(err.code ?? 500, { "content-type": "application/json; charset=utf-8" });
              res.end(JSON.stringify({ error: { message: err.message } }));
            },
          },
        ],
      },
      methods: {
        authenticate(_ctx: Context, _route: unknown, req: IncomingMessage) {
          const identity = IDENTITIES.get(bearer(req) ?? "");
          if (!identity) throw new ApiGateway.Errors.UnAuthorizedError(ApiGateway.Errors.ERR_INVALID_TOKEN, null);
          return identity;
        },
        authorize(ctx: Context<unknown, { user: typeof IDENTITY; auth?: typeof IDENTITY }>) {
          if (!ctx.meta.user.scopes.includes("org:admin")) throw new ApiGateway.Errors.ForbiddenError("FORBIDDEN", null);
          ctx.meta.auth = ctx.meta.user;
        },
      },
    });
  } else {
    createServer(async (req, res) => {
      try {
        const url = req.url ?? "/";
        const q = url.indexOf("?");
        const path = q < 0 ? url : url.slice(0, q);
        if (req.method !== "GET" || path !== "/v1/me") throw new Errors.MoleculerClientError("No route", 404);
        const identity = IDENTITIES.get(bearer(req) ?? "");
        if (!identity) throw new Errors.MoleculerClientError("Unauthorized", 401);
        if (!identity.scopes.includes("org:admin")) throw new Errors.MoleculerClientError("Forbidden", 403);
        const id = requestId();
        const data = await broker.call("me.get", {}, { meta: { auth: identity, request_id: id } });
        const payload = JSON.stringify({ data });
        res.writeHead(200, {
          "content-type": "application/json; charset=utf-8",
          "content-length": Buffer.byteLength(payload),
          "request-id": id,
        });
        res.end(payload);
      } catch (err) {
        const e = err as { code?: number; message: string };
        res.writeHead(e.code ?? 500, { "content-type": "application/json; charset=utf-8" });
        res.end(JSON.stringify({ error: { message: e.message } }));
      }
    }).listen(port, "127.0.0.1");
  }
  await broker.start();
}

async function run(kind: Kind): Promise<number> {
  const port = await freePort();
  const child = spawn(process.execPath, [__filename, "serve", kind, String(port)], { stdio: "inherit" });
  const proc: Proc = { name: kind, child, output: () => "", kill: async () => void child.kill("SIGKILL") };
  try {
    const url = `http://127.0.0.1:${port}/v1/me`;
    const headers = { authorization: `Bearer ${KEY}` };
    await waitFor(kind, async () => (await request(url, { headers })).statusCode === 200);
    await autocannon({ url, headers, connections: CONNECTIONS, duration: 2 });
    const result = await autocannon({ url, headers, connections: CONNECTIONS, duration: SECONDS });
    if (result.non2xx + result.errors > 0) throw new Error(`${kind}: ${result.non2xx} non-2xx answers, ${result.errors} errors`);
    return Math.round(result.requests.average);
  } finally {
    await proc.kill();
  }
}

async function main(): Promise<void> {
  const order: Kind[] = ["bare", "web-hooks", "own-server", "own-server", "web-hooks", "bare"];
  const figures: Record<Kind, number[]> = { bare: [], "web-hooks": [], "own-server": [] };
  for (const kind of order) figures[kind].push(await run(kind));
  const bare = mean(figures.bare);
  console.log(`\nGET /v1/me, ${SECONDS}s each at ${CONNECTIONS} connections; ratios to bare's mean (${Math.round(bare)} req/s)`);
  for (const kind of KINDS) {
    const rps = mean(figures[kind]);
    console.log(`${kind.padEnd(12)} ${figures[kind].join(" / ").padStart(16)} req/s   ${(rps / bare).toFixed(2)}x`);
  }
  console.log(`own-server ÷ web-hooks: ${(mean(figures["own-server"]) / mean(figures["web-hooks"])).toFixed(2)}x`);
}

const [mode, kind, port] = process.argv.slice(2);
(mode === "serve" ? serve(kind as Kind, Number(port)) : main()).catch((err) => {
  console.error(err);
  process.exit(1);
});
