import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * bin/build-if-stale.mjs in a project of its own (a temporary folder whose `build` script counts
 * its runs), so changing a source here rebuilds nothing of the real project.
 */
describe("the build before npm start and npm run cli", () => {
  let root: string;
  const builds = () => readFileSync(join(root, "builds.txt"), "utf8").length;
  const check = () => {
    const res = spawnSync(process.execPath, [join(root, "bin/build-if-stale.mjs")], {
      cwd: root,
      encoding: "utf8",
      env: { ...process.env },
    });
    expect({ status: res.status, stderr: res.stderr }).toEqual({ status: 0, stderr: "" });
  };
  /** `path` changed after the last build: its stamp is made 10 s old, whatever the file system's time resolution. */
  const changed = (path: string) => {
    const past = new Date(Date.now() - 10_000);
    utimesSync(join(root, "dist/.build-stamp"), past, past);
    utimesSync(path, new Date(), new Date());
  };

  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), "stale-"));
    mkdirSync(join(root, "bin"));
    mkdirSync(join(root, "shared"));
    mkdirSync(join(root, "dist"));
    copyFileSync(join(__dirname, "../../../bin/build-if-stale.mjs"), join(root, "bin/build-if-stale.mjs"));
    writeFileSync(join(root, "shared/a.ts"), "export const a = 1;\n");
    writeFileSync(join(root, "shared/b.ts"), "export const b = 1;\n");
    writeFileSync(join(root, "builds.txt"), "");
    const build = `node -e "require('fs').appendFileSync('builds.txt', 'x')" && node bin/build-if-stale.mjs --mark`;
    writeFileSync(join(root, "package.json"), JSON.stringify({ name: "stale-check", private: true, scripts: { build } }));
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it("builds when never built, not when the build is current, and again after a source changes or goes", () => {
    check();
    expect(builds()).toBe(1);
    check();
    check();
    expect(builds()).toBe(1);
    changed(join(root, "shared/a.ts"));
    check();
    expect(builds()).toBe(2);
    check();
    expect(builds()).toBe(2);
    rmSync(join(root, "shared/b.ts"));
    changed(join(root, "shared"));
    check();
    expect(builds()).toBe(3);
  });
});
