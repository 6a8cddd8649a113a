import { spawnSync } from "node:child_process";
import { statSync } from "node:fs";
import { join } from "node:path";

/**
 * `npm run cli` as people run it: once the build is current it starts the CLI without building
 * (bin/build-if-stale.mjs), so a command answers in well under a second instead of after a build.
 */
jest.setTimeout(120_000);

const ROOT = join(__dirname, "../..");
const STAMP = join(ROOT, "dist/.build-stamp");
const npmCli = () => {
  const started = performance.now();
  const res = spawnSync("npm", ["run", "--silent", "cli", "--", "--help"], { cwd: ROOT, encoding: "utf8", timeout: 100_000 });
  return { ...res, ms: Math.round(performance.now() - started) };
};

describe("npm run cli", () => {
  it("builds only when a source changed: a second call runs the built CLI at once", () => {
    const first = npmCli();
    expect(first.status).toBe(0);
    const built = statSync(STAMP).mtimeMs;
    const second = npmCli();
    expect({ status: second.status, usage: second.stdout.startsWith("Usage: ") }).toEqual({ status: 0, usage: true });
    // No build ran: the stamp the build writes is the same.
    expect(statSync(STAMP).mtimeMs).toBe(built);
    process.stdout.write(`second \`npm run --silent cli -- --help\`: ${second.ms} ms (first: ${first.ms} ms)\n`);
  });
});
