import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

/**
 * The house's floors, read from the import statements of the source tree: `shared/` imports
 * nothing above it, a service folder imports no other service folder, and the dashboard reaches the
 * server's code only through `shared/` (its wire types). Only the composition root (`app/`), the
 * entry points and the tools know every room.
 */
const ROOT = resolve(__dirname, "../..");
const SOURCE_DIRS = ["app", "bin", "services", "shared", "tools", "bench", "dashboard/src"];

function sourceFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.(ts|tsx|mts)$/.test(entry.name) ? [path] : [];
  });
}

const IMPORT =
  /(?:^|[\s;])(?:import|export)\s[^;]*?\sfrom\s+["']([^"']+)["']|(?:^|[\s;])import\s+["']([^"']+)["']|\b(?:import|require)\(\s*["']([^"']+)["']\s*\)/g;

/** The relative imports of one file's text, as paths from the repository's root. */
function importsOf(file: string, text: string): string[] {
  const found: string[] = [];
  for (const match of text.matchAll(IMPORT)) {
    const spec = match[1] ?? match[2] ?? match[3];
    if (spec.startsWith(".")) found.push(relative(ROOT, resolve(ROOT, dirname(file), spec)));
  }
  return found;
}

/** What `file` may not import: a reason for each import that reaches the wrong floor. */
function violations(file: string, imports: readonly string[]): string[] {
  const inside = (path: string, dir: string) => path === dir || path.startsWith(`${dir}/`);
  const serviceOf = (path: string) => /^services\/([^/]+)\//.exec(path)?.[1];
  return imports.flatMap((target) => {
    if (inside(file, "shared") && !inside(target, "shared")) return [`${file} (shared/) imports ${target}, above it`];
    const own = serviceOf(file);
    if (own !== undefined) {
      if (inside(target, "services") && serviceOf(target) !== own)
        return [`${file} (service ${own}) imports ${target}, outside its folder`];
      if (!inside(target, "services") && !inside(target, "shared")) return [`${file} (service ${own}) imports ${target}, above it`];
    }
    if (inside(file, "dashboard/src") && !inside(target, "dashboard") && !inside(target, "shared")) {
      return [`${file} (the dashboard) imports ${target}: server code is reached through shared/`];
    }
    return [];
  });
}

/**
 * The import cycles of a graph (its strongly connected components of more than one file, or a file
 * importing itself), each as its files sorted. A path names a file without its extension; an import
 * of a folder reaches its `index`.
 */
export function cyclesOf(nodes: readonly { file: string; imports: readonly string[] }[]): string[][] {
  const key = (path: string) => path.replace(/\.(ts|tsx|mts)$/, "");
  const known = new Set(nodes.map((n) => key(n.file)));
  const edges = new Map<string, string[]>();
  for (const { file, imports } of nodes) {
    const targets = imports.map(key).map((t) => (known.has(t) ? t : known.has(`${t}/index`) ? `${t}/index` : t));
    edges.set(
      key(file),
      targets.filter((t) => known.has(t)),
    );
  }
  // Tarjan's algorithm, iterative so a deep graph cannot overflow the stack.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const found: string[][] = [];
  let counter = 0;
  for (const start of edges.keys()) {
    if (index.has(start)) continue;
    const work: { node: string; next: number }[] = [{ node: start, next: 0 }];
    index.set(start, counter);
    low.set(start, counter++);
    stack.push(start);
    onStack.add(start);
    while (work.length > 0) {
      const frame = work[work.length - 1];
      const targets = edges.get(frame.node) ?? [];
      if (frame.next < targets.length) {
        const target = targets[frame.next++];
        if (!index.has(target)) {
          index.set(target, counter);
          low.set(target, counter++);
          stack.push(target);
          onStack.add(target);
          work.push({ node: target, next: 0 });
        } else if (onStack.has(target)) low.set(frame.node, Math.min(low.get(frame.node)!, index.get(target)!));
        continue;
      }
      work.pop();
      if (work.length > 0) {
        const parent = work[work.length - 1].node;
        low.set(parent, Math.min(low.get(parent)!, low.get(frame.node)!));
      }
      if (low.get(frame.node) === index.get(frame.node)) {
        const component: string[] = [];
        let member: string;
        do {
          member = stack.pop()!;
          onStack.delete(member);
          component.push(member);
        } while (member !== frame.node);
        if (component.length > 1 || (edges.get(frame.node) ?? []).includes(frame.node)) found.push(component.sort());
      }
    }
  }
  return found;
}

const graph = SOURCE_DIRS.flatMap(sourceFiles)
  .concat("moleculer.config.ts")
  .map((file) => ({ file, imports: importsOf(file, readFileSync(join(ROOT, file), "utf8")) }));

describe("the import graph", () => {
  it("is read from every source file (the walk finds the composition root's imports)", () => {
    const root = graph.find((f) => f.file === "app/broker.ts");
    expect(root?.imports).toEqual(expect.arrayContaining(["moleculer.config", "services", "services/gateway/routes", "app/openapi"]));
    expect(graph.filter((f) => f.file.startsWith("services/")).length).toBeGreaterThan(20);
    expect(graph.some((f) => f.file.startsWith("dashboard/src/"))).toBe(true);
  });

  it("has shared/ import nothing above it, no service import another, and the dashboard reach the server only through shared/", () => {
    expect(graph.flatMap(({ file, imports }) => violations(file, imports))).toEqual([]);
  });

  it("names each kind of wrong import (the rule is not vacuous)", () => {
    const wrong = [
      ...importsOf("shared/x.ts", 'import { ROUTES } from "../services/gateway/routes";'),
      ...importsOf("shared/y.ts", 'export { brokerOptions } from "../moleculer.config";'),
    ];
    expect(violations("shared/x.ts", wrong)).toHaveLength(2);
    expect(
      violations(
        "services/keys/keys.service.ts",
        importsOf("services/keys/keys.service.ts", 'import type { X } from "../auth/auth.service";'),
      ),
    ).toEqual(["services/keys/keys.service.ts (service keys) imports services/auth/auth.service, outside its folder"]);
    expect(
      violations(
        "services/keys/keys.service.ts",
        importsOf("services/keys/keys.service.ts", 'const m = await import("../../app/broker");'),
      ),
    ).toHaveLength(1);
    expect(
      violations(
        "dashboard/src/api.ts",
        importsOf("dashboard/src/api.ts", 'import type { KeyView } from "../../services/keys/keys.logic";'),
      ),
    ).toHaveLength(1);
    expect(
      violations(
        "services/keys/keys.service.ts",
        importsOf("services/keys/keys.service.ts", 'import { ApiError } from "../../shared/errors";'),
      ),
    ).toEqual([]);
  });

  it("has no import cycle (type-only imports included: a cycle of types is still two files that cannot be read apart)", () => {
    expect(cyclesOf(graph)).toEqual([]);
  });
});

describe("cyclesOf", () => {
  it("finds a cycle through three files and a file importing itself, and nothing in a tree", () => {
    const files = [
      { file: "shared/a.ts", imports: ["shared/b"] },
      { file: "shared/b.ts", imports: ["shared/c", "shared/d"] },
      { file: "shared/c.ts", imports: ["shared/a"] },
      { file: "shared/d.ts", imports: [] },
      { file: "shared/e.ts", imports: ["shared/e"] },
    ];
    expect(cyclesOf(files).sort()).toEqual([["shared/a", "shared/b", "shared/c"], ["shared/e"]]);
    expect(cyclesOf(files.filter((f) => f.file !== "shared/c.ts" && f.file !== "shared/e.ts"))).toEqual([]);
  });

  it("follows an import of a folder to its index", () => {
    const files = [
      { file: "app/broker.ts", imports: ["services"] },
      { file: "services/index.ts", imports: ["app/broker"] },
    ];
    expect(cyclesOf(files)).toEqual([["app/broker", "services/index"]]);
  });
});
