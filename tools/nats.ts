import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connect, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * A real nats-server for tests and `npm run cluster` (Debian's `nats-server` package), on a free
 * loopback port, which refuses any client without its user and password (generated per server).
 */
export interface NatsServer {
  /** `nats://<user>:<password>@127.0.0.1:<port>`, for TRANSPORTER or a broker's `transporter`. */
  url: string;
  /** `nats://127.0.0.1:<port>`: the address without the credentials. */
  address: string;
  port: number;
  user: string;
  password: string;
  /** The settings that give a node the credentials: NATS_USER and NATS_PASSWORD. */
  env: { NATS_USER: string; NATS_PASSWORD: string };
  /** Stops the server (SIGTERM, then SIGKILL after 5 s) and resolves once it has exited. */
  stop(): Promise<void>;
}

/** A loopback port nobody listens on right now. */
export function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const probe = createServer();
    probe.once("error", fail);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => ok(port));
    });
  });
}

const accepts = (port: number): Promise<boolean> =>
  new Promise((ok) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      ok(true);
    });
    socket.once("error", () => ok(false));
  });

/**
 * `detached`: in a process group of its own, so a Ctrl-C meant for the parent does not stop it
 * before the parent has stopped the processes that use it.
 */
export async function startNats(timeoutMs = 10_000, detached = false): Promise<NatsServer> {
  const port = await freePort();
  const user = "wfp";
  const password = randomBytes(18).toString("base64url");
  // In a file only this user reads, not on the command line where any local user would see it.
  const dir = mkdtempSync(join(tmpdir(), "wfp-nats-"));
  const config = join(dir, "nats.conf");
  writeFileSync(config, `authorization {\n  user: "${user}"\n  password: "${password}"\n}\n`, { mode: 0o600 });
  const removeConfig = () => rmSync(dir, { recursive: true, force: true });
  const child = spawn("nats-server", ["-a", "127.0.0.1", "-p", String(port), "-c", config], {
    stdio: ["ignore", "ignore", "pipe"],
    detached,
  });
  let stderr = "";
  child.stderr?.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  const exited = new Promise<void>((done) => child.once("exit", () => done()));
  let running = true;
  void exited.then(() => (running = false));
  // A test runner that dies without stopping it must not leave the server behind.
  const killOnExit = () => {
    child.kill("SIGKILL");
    removeConfig();
  };
  process.once("exit", killOnExit);

  const failed = new Promise<never>((_, fail) => {
    child.once("error", (err) => fail(new Error(`cannot start nats-server (apt-get install -y nats-server): ${err.message}`)));
    void exited.then(() => fail(new Error(`nats-server exited at start: ${stderr.trim()}`)));
  });
  failed.catch(() => undefined);
  const listening = (async () => {
    const until = Date.now() + timeoutMs;
    while (running && Date.now() < until) {
      // Our own server's word, not just an open port: another test's nats-server may hold the
      // port this one failed to bind, and a cluster joined to it would mix the two tests' nodes.
      if (
        stderr.includes(`Listening for client connections on 127.0.0.1:${port}`) &&
        stderr.includes("Server is ready") &&
        (await accepts(port))
      )
        return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`nats-server did not listen on ${port} within ${timeoutMs} ms: ${stderr.trim()}`);
  })();
  try {
    await Promise.race([listening, failed]);
  } catch (err) {
    killOnExit();
    process.off("exit", killOnExit);
    throw err;
  }

  return {
    url: `nats://${user}:${password}@127.0.0.1:${port}`,
    address: `nats://127.0.0.1:${port}`,
    port,
    user,
    password,
    env: { NATS_USER: user, NATS_PASSWORD: password },
    async stop() {
      process.off("exit", killOnExit);
      removeConfig();
      if (!running) return;
      const force = setTimeout(() => child.kill("SIGKILL"), 5_000);
      child.kill("SIGTERM");
      await exited;
      clearTimeout(force);
    },
  };
}
