import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { Agent, getGlobalDispatcher, setGlobalDispatcher } from "undici";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { basename, join, resolve } from "node:path";

import { eventually } from "./eventually";

export { freePort, startNats, type NatsServer } from "./nats";

/**
 * Starting the platform's processes and a nats-server on this machine: used by the cluster tests,
 * the benchmarks and the local cluster command alike.
 */
// The same file runs compiled (dist/tools) and from source under jest (tools/).
const ROOT = basename(resolve(__dirname, "..")) === "dist" ? resolve(__dirname, "../..") : resolve(__dirname, "..");
export const SERVER_JS = join(ROOT, "dist/bin/server.js");
export const CLI_JS = join(ROOT, "dist/bin/cli.js");

/** Waits on a condition (tools/eventually.ts): the name the cluster tests and tools have used. */
export async function waitFor(what: string, check: () => Promise<boolean> | boolean, timeoutMs = 20_000): Promise<void> {
  await eventually(what, check, timeoutMs, 100);
}

export interface Proc {
  name: string;
  child: ChildProcess;
  /** Everything the process printed so far. */
  output(): string;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

function track(name: string, child: ChildProcess): Proc {
  let out = "";
  child.stdout?.on("data", (d) => (out += d));
  child.stderr?.on("data", (d) => (out += d));
  return {
    name,
    child,
    output: () => out,
    kill(signal: NodeJS.Signals = "SIGTERM") {
      if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
      return new Promise((done) => {
        child.once("exit", () => done());
        child.kill(signal);
      });
    },
  };
}

/** One platform process (`node dist/bin/server.js`) with these settings. */
export function startNode(name: string, env: Record<string, string>, inherit = false): Proc {
  const child = spawn(process.execPath, [SERVER_JS], {
    env: { ...process.env, LOG_LEVEL: "warn", NODE_ID: name, HOST: "127.0.0.1", ...env },
    stdio: ["ignore", inherit ? "inherit" : "pipe", inherit ? "inherit" : "pipe"],
  });
  return track(name, child);
}

/** How long a whole platform process may take to start on a busy machine (it loads and starts every service). */
export const START_TIMEOUT_MS = 60_000;

/**
 * Waits until `server` has marked `dataDir` as used (bin/server-mark.ts: it does once every
 * service has started), reading the directory rather than running the CLI on each try. A server
 * that exits first fails the wait at once, with what it printed.
 */
export async function waitForServerMark(dataDir: string, server: Proc): Promise<void> {
  const marks = join(dataDir, "servers");
  await eventually(
    `${server.name}'s mark in DATA_DIR`,
    () => {
      if (server.child.exitCode !== null || server.child.signalCode !== null)
        throw new Error(`${server.name} exited (${server.child.exitCode ?? server.child.signalCode}): ${server.output()}`);
      return existsSync(marks) && readdirSync(marks).some((name) => name.endsWith(".json"));
    },
    START_TIMEOUT_MS,
    100,
  );
}

export interface CliOrg {
  org: { id: string; name: string };
  api_keys: { id: string; key: string; environment: "live" | "test"; scopes: string[] }[];
}

/**
 * After a call that blocked this process's event loop (a CLI run to its end): a kept-alive
 * connection the server closed meanwhile (its 5 s idle time-out) would be taken for the next
 * request before its close is seen, and that request fail with "other side closed". Requests from
 * now on get new connections; the old ones finish what they carry, then close.
 */
function freshConnections(): void {
  const old = getGlobalDispatcher();
  setGlobalDispatcher(new Agent());
  old.close().catch(() => undefined);
}

/** The bootstrap CLI, as the README runs it; returns its one JSON object. */
export function runCli(args: string[], env: Record<string, string>): CliOrg {
  const res = spawnSync(process.execPath, [CLI_JS, ...args], { env: { ...process.env, ...env }, encoding: "utf8", timeout: 30_000 });
  freshConnections();
  if (res.status !== 0) throw new Error(`cli failed (${res.status}): ${res.stderr}`);
  return JSON.parse(res.stdout) as CliOrg;
}

export interface CliResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** The CLI run to its end, whatever it answers; `node` is the Node binary (default: this one). */
export function cliRun(args: string[], env: Record<string, string>, node = process.execPath): CliResult {
  const res = spawnSync(node, [CLI_JS, ...args], { env: { ...process.env, ...env }, encoding: "utf8", timeout: 30_000 });
  freshConnections();
  return { status: res.status, stdout: res.stdout, stderr: res.stderr };
}

/** A CLI command that keeps running (listen, tail): its output as it comes; stopped with kill(). */
export function startCli(args: string[], env: Record<string, string>): Proc {
  const child = spawn(process.execPath, [CLI_JS, ...args], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  return track(`cli ${args.slice(0, 2).join(" ")}`, child);
}

/** Peak resident memory of a process, in MiB (Linux). */
export function peakRssMiB(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const match = /VmHWM:\s+(\d+) kB/.exec(status);
    return match ? Math.round(Number(match[1]) / 1024) : undefined;
  } catch {
    return undefined;
  }
}
