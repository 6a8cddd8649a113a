import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { freePort, waitFor } from "../../tools/procs";

/**
 * A newcomer's run, from the README: `npm start`, the bootstrap CLI in another terminal, then the
 * README's own curl commands with the printed key.
 */
jest.setTimeout(120_000);

const ROOT = resolve(__dirname, "../..");
const readme = readFileSync(join(ROOT, "README.md"), "utf8");

/** The README's curl commands (continuation lines joined), as a newcomer would paste them. */
function readmeCurls(): string[] {
  const blocks = [...readme.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1].replace(/\\\n\s*/g, ""));
  return blocks.flatMap((b) => b.split("\n")).filter((line) => line.startsWith("curl "));
}

let server: ChildProcess;
let dataDir: string;
let port: number;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "wfp-new-"));
  port = await freePort();
  server = spawn("npm", ["start"], {
    cwd: ROOT,
    env: { ...process.env, PORT: String(port), DATA_DIR: dataDir },
    stdio: "ignore",
    detached: true,
  });
  await waitFor("npm start", async () => (await fetch(`http://127.0.0.1:${port}/v1/api-keys`)).status === 401, 60_000);
});

afterAll(async () => {
  // npm and the server it started are one process group.
  const exited = new Promise((r) => server.once("exit", r));
  process.kill(-(server.pid as number), "SIGTERM");
  await exited;
  rmSync(dataDir, { recursive: true, force: true });
});

it("starts, bootstraps an organization with the CLI, and answers the README's curl commands", () => {
  expect(readme).toContain("npm install && npm start");
  expect(readme).toContain('npm run --silent cli -- orgs create --name "Acme"');
  const out = execFileSync("npm", ["run", "--silent", "cli", "--", "orgs", "create", "--name", "Acme"], {
    cwd: ROOT,
    env: { ...process.env, DATA_DIR: dataDir },
    encoding: "utf8",
  });
  const printed = JSON.parse(out);
  expect(out.trim().split("\n")).toHaveLength(1);
  expect(printed.org).toMatchObject({ name: "Acme" });
  expect(printed.org.id).toMatch(/^org_/);
  const live = printed.api_keys.find((k: { environment: string }) => k.environment === "live");
  const test = printed.api_keys.find((k: { environment: string }) => k.environment === "test");
  expect(live).toMatchObject({ scopes: ["org:admin"] });
  expect(live.key).toMatch(/^svc_live_/);
  expect(test.key).toMatch(/^svc_test_/);

  const curls = readmeCurls();
  expect(curls.length).toBeGreaterThanOrEqual(2);
  const answers = curls.map((cmd) =>
    JSON.parse(
      execFileSync("bash", ["-c", cmd.replace("localhost:3000", `127.0.0.1:${port}`)], {
        env: { ...process.env, KEY: live.key },
        encoding: "utf8",
      }),
    ),
  );
  expect(answers[0].data.length).toBeGreaterThanOrEqual(1);
  expect(answers[0].meta.total).toBe(answers[0].data.length);
  expect(answers[1].data).toMatchObject({ name: "CI", scopes: ["workflows:read"] });
  expect(answers[1].data.key).toMatch(/^svc_live_/);
});
