import { spawn } from "node:child_process";
import { connect, createServer } from "node:net";

/**
 * A real nats-server for tests (Debian's `nats-server` package), on a free loopback port.
 */
export interface NatsServer {
  /** `nats://127.0.0.1:<port>`, for TRANSPORTER or a broker's `transporter`. */
  url: string;
  port: number;
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
  const child = spawn("nats-server", ["-a", "127.0.0.1", "-p", String(port)], { stdio: ["ignore", "ignore", "pipe"], detached });
  let stderr = "";
  child.stderr?.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  const exited = new Promise<void>((done) => child.once("exit", () => done()));
  let running = true;
  void exited.then(() => (running = false));
  // A test runner that dies without stopping it must not leave the server behind.
  const killOnExit = () => child.kill("SIGKILL");
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
      if (stderr.includes(`Listening for client connections on 127.0.0.1:${port}`) && stderr.includes("Server is ready") && (await accepts(port))) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`nats-server did not listen on ${port} within ${timeoutMs} ms: ${stderr.trim()}`);
  })();
  try {
    await Promise.race([listening, failed]);
  } catch (err) {
    child.kill("SIGKILL");
    process.off("exit", killOnExit);
    throw err;
  }

  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    async stop() {
      process.off("exit", killOnExit);
      if (!running) return;
      const force = setTimeout(() => child.kill("SIGKILL"), 5_000);
      child.kill("SIGTERM");
      await exited;
      clearTimeout(force);
    },
  };
}
