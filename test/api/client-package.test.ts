import { execFile, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { usePlatform } from "../helpers/platform";

/**
 * The TypeScript client as a user gets it: `npm install <repository>/clients/typescript` into an
 * empty project, then imported by its package name from plain ESM and from type-checked TypeScript.
 * The install is offline: openapi-fetch and its one dependency come as tarballs packed from this
 * repository's node_modules, and npm's cache is a fresh directory, so nothing is fetched.
 */
const ROOT = join(__dirname, "..", "..");
const CLIENT = join(ROOT, "clients", "typescript");
const suite = usePlatform();
let dir: string;
let app: string;

function run(
  cmd: string,
  args: string[],
  cwd: string,
  env: Record<string, string> = {},
): { code: number | null; out: string; err: string } {
  const r = spawnSync(cmd, args, { cwd, encoding: "utf8", env: { ...process.env, ...env }, timeout: 120_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

/** A process the in-process server must answer while it runs: spawnSync would block its event loop. */
function runAsync(
  cmd: string,
  args: string[],
  cwd: string,
  env: Record<string, string>,
): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { cwd, env: { ...process.env, ...env }, timeout: 30_000 }, (error, out, err) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, out, err }),
    );
  });
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "client-pkg-"));
  app = join(dir, "app");
  mkdirSync(app);
  // npm pack prints the tarball's name last: the versions are whatever node_modules holds.
  const tarballs = ["openapi-fetch", "openapi-typescript-helpers"].map((dep) => {
    const packed = run("npm", ["pack", "--ignore-scripts", "--pack-destination", dir, join(ROOT, "node_modules", dep)], dir);
    expect({ dep, code: packed.code, err: packed.code === 0 ? "" : packed.err }).toEqual({ dep, code: 0, err: "" });
    return join(dir, packed.out.trim().split("\n").pop()!);
  });
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
  const flags = ["--offline", "--cache", join(dir, "npm-cache"), "--install-links", "--no-audit", "--no-fund"];
  const installed = run("npm", ["install", ...flags, CLIENT, ...tarballs], app);
  expect({ code: installed.code, err: installed.code === 0 ? "" : installed.err }).toEqual({ code: 0, err: "" });
}, 180_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("the client package (clients/typescript) installed from the repository path", () => {
  it("installs a copy holding the ESM build, its types and the API document, and nothing else", () => {
    const pkg = join(app, "node_modules", "@workflow-platform", "client");
    const manifest = JSON.parse(readFileSync(join(pkg, "package.json"), "utf8"));
    expect(manifest).toMatchObject({
      name: "@workflow-platform/client",
      exports: { ".": { types: "./dist/index.d.ts", import: "./dist/index.js" } },
    });
    const listed = run("find", [".", "-type", "f", "-not", "-path", "./node_modules/*"], pkg).out.split("\n").filter(Boolean).sort();
    expect(listed).toEqual([
      "./README.md",
      "./dist/index.d.ts",
      "./dist/index.js",
      "./dist/package.json",
      "./dist/schema.d.ts",
      "./dist/schema.js",
      "./openapi.json",
      "./package.json",
    ]);
  });

  it("is imported by name from plain ESM and drives a running server", async () => {
    writeFileSync(
      join(app, "main.mjs"),
      [
        'import { platformClient } from "@workflow-platform/client";',
        "const api = platformClient(process.env.BASE, process.env.KEY);",
        "const wf = await api.POST('/workflows', { body: { name: 'Installed', trigger: { type: 'manual' }, steps: [{ type: 'emit', event_type: 'order.shipped', data: { n: 1 } }] } });",
        "const run = await api.POST('/workflows/{id}/runs', { params: { path: { id: wf.data.data.id } }, body: { input: { order: 'o_1' } } });",
        "const missing = await api.GET('/workflows/{id}', { params: { path: { id: 'wf_01jdx3kq9v7c2m5n8p4r6t0w1y' } } });",
        "console.log(JSON.stringify({ created: wf.response.status, name: wf.data.data.name, started: run.response.status, input: run.data.data.input, missing: missing.response.status, code: missing.error.error.code }));",
      ].join("\n"),
    );
    const ran = await runAsync(process.execPath, ["main.mjs"], app, { BASE: suite.p.baseUrl, KEY: suite.acme.test });
    expect({ code: ran.code, err: ran.err }).toEqual({ code: 0, err: "" });
    expect(JSON.parse(ran.out)).toEqual({
      created: 201,
      name: "Installed",
      started: 201,
      input: { order: "o_1" },
      missing: 404,
      code: "resource_not_found",
    });
  });

  it("brings its types: a consumer's TypeScript compiles, and a wrong body does not", () => {
    writeFileSync(
      join(app, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          module: "nodenext",
          moduleResolution: "nodenext",
          target: "ES2022",
          lib: ["ES2022", "DOM"],
          types: [],
          strict: true,
          noEmit: true,
        },
      }),
    );
    writeFileSync(
      join(app, "main.ts"),
      [
        'import { platformClient, type Schemas } from "@workflow-platform/client";',
        'const api = platformClient("http://127.0.0.1:3000/v1", "svc_test_x");',
        'const wf = await api.POST("/workflows", { body: { name: "x", trigger: { type: "manual" }, steps: [{ type: "delay", duration_ms: 1 }] } });',
        'const status: Schemas["Workflow"]["status"] | undefined = wf.data?.data.status;',
        // Unused when the package's types are lost (everything `any`), which fails the compile.
        "// @ts-expect-error a trigger is an object",
        'await api.POST("/workflows", { body: { name: "x", trigger: 42, steps: [] } });',
        "console.log(status);",
      ].join("\n"),
    );
    const tsc = run(process.execPath, [join(ROOT, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.json"], app);
    expect({ code: tsc.code, out: tsc.out }).toEqual({ code: 0, out: "" });
  }, 60_000);
});
