import { spawn, type ChildProcess } from "node:child_process";
import { resolve } from "node:path";
import { createInterface } from "node:readline";
import { printable } from "../bin/cli/printable.logic";
import { SERVICE_NAMES, type ServiceName } from "../shared/config";
import { freePort, startNats } from "./nats";
import { SERVER_JS, waitFor } from "./procs";

/**
 * `npm run cluster`: the docker-compose topology on this machine without Docker — a nats-server,
 * and one process per service, or several (without MONGO_URL all of them open the same SQLite file
 * under DATA_DIR):
 *
 *   npm run cluster -- --gateway 2 --webhook-dispatcher 2 --workflows 2
 *
 * Gateways listen on PORT, PORT+1, … (PORT defaults to 3000); with METRICS_PORT set, each process
 * serves its metrics on its own port from there on (listed in the `cluster ready` line). Every process's JSON log lines are
 * shown as one readable, interleaved stream. Ctrl-C (or SIGTERM) stops the gateways first, then the
 * rest, each with SIGTERM (SIGKILL after 15 s), then nats-server. Once everything runs it prints one
 * line `cluster ready {json}` with each process's name, pid and port.
 */
interface Member {
  name: string;
  service: ServiceName;
  port?: number;
  child: ChildProcess;
}

const COLORS = [36, 33, 35, 32, 34, 91, 92, 93, 94, 95, 96];
const color = process.stdout.isTTY
  ? (n: number, s: string) => `\x1b[${COLORS[n % COLORS.length]}m${s}\x1b[0m`
  : (_n: number, s: string) => s;

function counts(argv: string[]): Map<ServiceName, number> {
  const out = new Map<ServiceName, number>(SERVICE_NAMES.map((name) => [name, 1]));
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i].replace(/^--/, "") as ServiceName;
    const n = Number(argv[i + 1]);
    if (!SERVICE_NAMES.includes(name as (typeof SERVICE_NAMES)[number]) || !Number.isInteger(n) || n < 0 || n > 20) {
      throw new Error(`usage: npm run cluster -- [--<service> <count 0..20>]...  (services: ${SERVICE_NAMES.join(", ")})`);
    }
    out.set(name, n);
  }
  return out;
}

/**
 * One line of a process's output, readable: time, level, message, the rest as key=value. Log
 * messages carry tenants' text (names, URLs, errors a receiver answered): its control characters are
 * shown escaped, never obeyed by the terminal, and the line stays one line.
 */
export function readable(line: string): string {
  let text = line;
  try {
    const entry = JSON.parse(line) as Record<string, unknown>;
    const { ts, level, msg, nodeID: _n, ns: _ns, mod, svc: _s, ...rest } = entry;
    const time = new Date(Number(ts) || Date.now()).toISOString().slice(11, 23);
    const extra = Object.entries(rest).map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`);
    text = `${time} ${String(level).toUpperCase().padEnd(5)} ${mod ? `[${String(mod)}] ` : ""}${String(msg)}${extra.length ? ` ${extra.join(" ")}` : ""}`;
  } catch {
    // not a JSON log line: as it is
  }
  return printable(text);
}

function show(index: number, name: string, line: string): void {
  process.stdout.write(`${color(index, name.padEnd(22))} ${readable(line)}\n`);
}

async function main(): Promise<void> {
  const wanted = counts(process.argv.slice(2));
  const basePort = Number(process.env.PORT ?? 3000);
  const dataDir = resolve(process.env.DATA_DIR ?? "./data");
  const nats = process.env.TRANSPORTER ? null : await startNats(10_000, true);
  // Our own nats-server's credentials reach the processes as settings, not inside the URL (which is printed).
  const transporter = process.env.TRANSPORTER ?? nats!.address;
  const members: Member[] = [];
  const metricsBase = process.env.METRICS_PORT ? Number(process.env.METRICS_PORT) : undefined;
  let stopping = false;

  const launch = (service: ServiceName, name: string, port?: number): Member => {
    const child = spawn(process.execPath, [SERVER_JS], {
      env: {
        ...process.env,
        TRANSPORTER: transporter,
        ...nats?.env,
        DATA_DIR: dataDir,
        SERVICES: service,
        NODE_ID: name,
        ...(port !== undefined && { PORT: String(port) }),
        // One metrics port per process: METRICS_PORT, METRICS_PORT+1, … in the order they start.
        ...(metricsBase !== undefined && { METRICS_PORT: String(metricsBase + members.length) }),
      },
      stdio: ["ignore", "pipe", "pipe"],
      // Its own process group: Ctrl-C reaches this command only, which stops the processes in order.
      detached: true,
    });
    const index = members.length;
    for (const stream of [child.stdout, child.stderr]) createInterface({ input: stream! }).on("line", (line) => show(index, name, line));
    child.once("exit", (code, signal) => {
      if (!stopping) show(index, name, `exited (${signal ?? code}) — the rest keeps running`);
    });
    const member = { name, service, port, child };
    members.push(member);
    return member;
  };

  const stop = async () => {
    if (stopping) return;
    stopping = true;
    process.stdout.write("stopping the cluster…\n");
    const byRole = [members.filter((m) => m.service === "gateway"), members.filter((m) => m.service !== "gateway")];
    for (const group of byRole) {
      await Promise.all(
        group.map(
          (m) =>
            new Promise<void>((done) => {
              if (m.child.exitCode !== null || m.child.signalCode !== null) return done();
              const force = setTimeout(() => m.child.kill("SIGKILL"), 15_000);
              m.child.once("exit", () => {
                clearTimeout(force);
                done();
              });
              m.child.kill("SIGTERM");
            }),
        ),
      );
    }
    await nats?.stop();
    process.exit(0);
  };
  process.once("SIGINT", () => void stop());
  process.once("SIGTERM", () => void stop());
  // Dying any other way, take the processes along.
  process.once("exit", () => {
    for (const m of members) if (m.child.exitCode === null) m.child.kill("SIGKILL");
  });

  for (const service of SERVICE_NAMES) {
    for (let i = 0; i < (wanted.get(service) ?? 0); i += 1) {
      const name = `${service}-${i + 1}`;
      launch(service, name, service === "gateway" ? (basePort === 0 ? await freePort() : basePort + i) : undefined);
    }
  }
  const gateways = members.filter((m) => m.service === "gateway");
  for (const g of gateways) {
    await waitFor(`${g.name} to be ready`, async () => (await fetch(`http://127.0.0.1:${g.port}/ready`)).status === 200, 60_000);
  }
  const ready = {
    nats: transporter,
    data_dir: dataDir,
    processes: members.map((m, i) => ({
      name: m.name,
      pid: m.child.pid,
      ...(m.port && { port: m.port }),
      ...(metricsBase !== undefined && { metrics_port: metricsBase + i }),
    })),
  };
  process.stdout.write(`cluster ready ${JSON.stringify(ready)}\n`);
  for (const g of gateways) process.stdout.write(`  ${g.name}: http://127.0.0.1:${g.port}/v1\n`);
}

if (require.main === module) {
  main().catch((err) => {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
