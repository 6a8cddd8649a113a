import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ServiceBroker } from "moleculer";
import mongoose from "mongoose";
import { request } from "undici";
import { createBroker } from "../../app/broker";
import { parseJson } from "../../shared/api/json-parse";
import { loadSettings } from "../../shared/config";
import type { Clock } from "../../shared/runtime/clock";
import { contractProblems } from "./contract";

export interface IssuedKey {
  id: string;
  key: string;
  environment: "live" | "test";
  scopes: string[];
}
export interface Bootstrap {
  org: { id: string; name: string };
  api_keys: IssuedKey[];
}

export interface Platform {
  broker: ServiceBroker;
  baseUrl: string;
  dataDir: string;
  /** What the bootstrap CLI does: a new organization with a live and a test org:admin key. */
  createOrg(name?: string): Promise<{ org: Bootstrap["org"]; live: string; test: string }>;
  stop(): Promise<void>;
}

export type TestOrg = Awaited<ReturnType<Platform["createOrg"]>>;

export interface PlatformOptions {
  /** The clock the platform's per-minute budgets read (test/helpers/clock.ts); the system's by default. */
  clock?: Clock;
}

/**
 * A suite's platform and two organizations (Acme, Globex), started before its tests and stopped
 * after them; read the fields inside tests.
 */
export function usePlatform(
  env: Record<string, string> = {},
  options: PlatformOptions = {},
): { p: Platform; acme: TestOrg; globex: TestOrg } {
  const suite = {} as { p: Platform; acme: TestOrg; globex: TestOrg };
  beforeAll(async () => {
    suite.p = await startPlatform(env, options);
    suite.acme = await suite.p.createOrg("Acme");
    suite.globex = await suite.p.createOrg("Globex");
  });
  afterAll(() => suite.p?.stop());
  return suite;
}

/** MONGO_URL with another database in it (the path before the options). */
export const withDatabase = (url: string, database: string): string =>
  url.replace(/^(mongodb(?:\+srv)?:\/\/[^/?]+)(\/[^?]*)?/, `$1/${database}`);

/**
 * Where the platforms of this run store: the embedded store under their DATA_DIR, unless the run
 * is `npm run test:mongo` (WFP_TEST_STORE=mongo, with MONGO_URL): then a database of their own on
 * that MongoDB, one per DATA_DIR, so a platform started again on a DATA_DIR finds its data there.
 * Only there: everywhere else the suites run on the embedded store, whatever MONGO_URL says.
 */
export function testStore(dataDir: string): { MONGO_URL?: string } {
  if (process.env.WFP_TEST_STORE !== "mongo") return {};
  const url = process.env.MONGO_URL;
  if (!url) throw new Error("WFP_TEST_STORE=mongo needs MONGO_URL (npm run test:mongo says how)");
  return { MONGO_URL: withDatabase(url, `wfp_test_${createHash("sha256").update(dataDir).digest("hex").slice(0, 20)}`) };
}

async function dropDatabase(url: string): Promise<void> {
  const conn = await mongoose.createConnection(url, { serverSelectionTimeoutMS: 5000 }).asPromise();
  try {
    await conn.dropDatabase();
  } finally {
    await conn.close();
  }
}

/**
 * The whole platform in this process, its gateway on a free port: on a fresh embedded store, or on
 * `env.DATA_DIR` when given (kept by `stop()`, so a test can start the platform again on it).
 */
export async function startPlatform(env: Record<string, string> = {}, options: PlatformOptions = {}): Promise<Platform> {
  const own = env.DATA_DIR === undefined;
  const dataDir = env.DATA_DIR ?? mkdtempSync(join(tmpdir(), "wfp-"));
  const store = testStore(dataDir);
  const settings = loadSettings({ PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "false", ...env, ...store, DATA_DIR: dataDir });
  const broker = createBroker(settings, {}, undefined, options.clock);
  await broker.start();
  const gateway = broker.getLocalService("gateway") as unknown as { server: { address(): { port: number } } };
  const baseUrl = `http://127.0.0.1:${gateway.server.address().port}/v1`;
  return {
    broker,
    baseUrl,
    dataDir,
    async createOrg(name = "Acme") {
      const res = await broker.call<Bootstrap, { name: string }>("orgs.create", { name });
      const live = res.api_keys.find((k) => k.environment === "live")?.key as string;
      const test = res.api_keys.find((k) => k.environment === "test")?.key as string;
      return { org: res.org, live, test };
    },
    async stop() {
      await broker.stop();
      if (!own) return;
      rmSync(dataDir, { recursive: true, force: true });
      if (store.MONGO_URL) await dropDatabase(store.MONGO_URL);
    },
  };
}

export interface ApiResponse<T = any> {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: T;
}

export interface CallOptions {
  key?: string;
  body?: unknown;
  /** Sent as is, instead of JSON-encoding `body`. */
  raw?: string | Buffer;
  headers?: Record<string, string>;
}

/** One HTTP request to the gateway, the way a client sends it. */
export async function api<T = any>(baseUrl: string, method: string, path: string, opts: CallOptions = {}): Promise<ApiResponse<T>> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.key) headers.authorization = `Bearer ${opts.key}`;
  let body: string | Buffer | undefined = opts.raw;
  if (body === undefined && opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers["content-type"] ??= "application/json";
  }
  const res = await request(`${baseUrl}${path}`, { method: method as "GET", headers, body });
  const text = await res.body.text();
  let parsed: unknown = text;
  try {
    // The platform's own parse: JSON.parse misreads some keys in this process (shared/api/json-parse.ts).
    parsed = text ? parseJson(text) : undefined;
  } catch {
    // not JSON: the test sees the text
  }
  const answer = { status: res.statusCode, headers: res.headers, body: parsed as T };
  // Every answer of every API test is held to the API reference (test/helpers/contract.ts).
  if (baseUrl.endsWith("/v1")) {
    const problems = contractProblems(method, path, answer);
    if (problems.length > 0) throw new Error(`The answer contradicts the API reference:\n${problems.join("\n")}`);
  }
  return answer;
}

/** The contract's error shape, asserted in one place. */
export function expectError(res: ApiResponse, status: number, code: string, param?: string): void {
  const got = { status: res.status, code: res.body?.error?.code };
  // On a mismatch the diff shows the answer's message too (which of several 503s it was, say).
  expect(got.status === status && got.code === code ? got : { ...got, message: res.body?.error?.message }).toEqual({ status, code });
  expect(typeof res.body.error.type).toBe("string");
  expect(typeof res.body.error.message).toBe("string");
  expect(res.body.error.request_id).toMatch(/^req_/);
  expect(res.headers["request-id"]).toBe(res.body.error.request_id);
  expect(res.body.data).toBeUndefined();
  if (param !== undefined) expect(res.body.error.param).toBe(param);
}
