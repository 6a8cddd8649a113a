// `npm start`, `npm run cli`, `npm run cluster` and the benches run the build only when a source changed
// since the last one: a CLI command then starts at once instead of after a full build. Plain
// JavaScript, run before anything is compiled. `--mark` (the end of `npm run build`) records a build.
import { spawnSync } from "node:child_process";
import { readdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import process from "node:process";

const ROOT = join(import.meta.dirname, "..");
const STAMP = join(ROOT, "dist", ".build-stamp");
/** What `npm run build` reads: tsconfig.build.json's folders, the dashboard, and their configuration. */
const SOURCES = [
  "app",
  "bin",
  "services",
  "shared",
  "bench",
  "tools",
  "dashboard",
  "moleculer.config.ts",
  "tsconfig.json",
  "tsconfig.build.json",
  "package.json",
  "package-lock.json",
];

/** The newest modification under `path`; folders count too, since removing a file changes its folder's. */
function newest(path) {
  let stat;
  try {
    stat = statSync(path);
  } catch {
    return 0;
  }
  let latest = stat.mtimeMs;
  if (stat.isDirectory()) for (const name of readdirSync(path)) latest = Math.max(latest, newest(join(path, name)));
  return latest;
}

if (process.argv.includes("--mark")) {
  writeFileSync(STAMP, `${new Date().toISOString()}\n`);
} else {
  let built = 0;
  try {
    built = statSync(STAMP).mtimeMs;
  } catch {
    // never built here
  }
  if (SOURCES.some((source) => newest(join(ROOT, source)) > built)) {
    const npm = process.env.npm_execpath;
    const res = npm
      ? spawnSync(process.execPath, [npm, "run", "--silent", "build"], { cwd: ROOT, stdio: "inherit" })
      : spawnSync("npm", ["run", "--silent", "build"], { cwd: ROOT, stdio: "inherit" });
    process.exit(res.status ?? 1);
  }
}
