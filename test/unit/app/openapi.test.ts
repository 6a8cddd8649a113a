import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROUTES } from "../../../services/gateway/routes";
import { RESOURCES } from "../../../shared/api/schemas";
import { documentText } from "../../../tools/openapi";
import { DOCUMENT, validatorOf } from "../../helpers/contract";

const bin = (name: string) => join(__dirname, "../../../node_modules/.bin", name);
const client = join(__dirname, "../../../clients/typescript");
let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "oas-"));
  writeFileSync(join(dir, "openapi.json"), documentText());
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs a tool: its exit code, its output, and what it said on stderr (Redocly reports there). */
function run(cmd: string, args: string[], input = ""): { code: number | null; out: string; err: string } {
  const r = spawnSync(cmd, args, { encoding: "utf8", input });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

describe("the API reference (app/openapi.ts)", () => {
  it("passes Redocly's recommended rules with no error and no warning", () => {
    const { code, out, err } = run(bin("redocly"), ["lint", "--extends", "recommended", "--format", "stylish", join(dir, "openapi.json")]);
    const said = `${out}\n${err}`;
    expect({ code, problems: said.split("\n").filter((l) => /\b(error|warning)\b/.test(l)) }).toEqual({ code: 0, problems: [] });
    expect(said).toContain("Your API description is valid");
  }, 60_000);

  it("is the one the TypeScript client was generated from, and the client is what the generator makes of it", () => {
    expect(readFileSync(join(client, "openapi.json"), "utf8")).toBe(documentText());
    const out = join(dir, "schema.ts");
    const gen = run(bin("openapi-typescript"), [join(dir, "openapi.json"), "--default-non-nullable", "false", "-o", out]);
    expect(gen.code).toBe(0);
    const fmt = run(bin("prettier"), ["--stdin-filepath", join(client, "schema.ts")], readFileSync(out, "utf8"));
    expect(fmt.code).toBe(0);
    // Regenerate with `npm run openapi` when this fails.
    expect(fmt.out).toBe(readFileSync(join(client, "schema.ts"), "utf8"));
  }, 60_000);

  it("names what every route answers, with a schema for it", () => {
    for (const route of ROUTES.filter((r) => !r.stream)) {
      expect({ route: route.path, resource: route.resource !== undefined && route.resource in RESOURCES }).toEqual({
        route: route.path,
        resource: true,
      });
    }
  });

  it("states nullability the 3.1 way, never with `nullable`", () => {
    expect(documentText()).not.toContain('"nullable"');
    expect(DOCUMENT.components.schemas.Workflow.properties.description.type).toEqual(["string", "null"]);
  });

  it("has examples that its own schemas accept", () => {
    for (const [path, ops] of Object.entries<any>(DOCUMENT.paths)) {
      for (const [method, op] of Object.entries<any>(ops)) {
        const status = ["201", "202", "200"].find((code) => op.responses[code])!;
        const json = op.responses[status].content["application/json"];
        if (!json) continue;
        const where = `paths/${path.replace(/~/g, "~0").replace(/\//g, "~1")}/${method}`;
        const validate = validatorOf(`${where}/responses/${status}/content/application~1json/schema`);
        expect({ where, ok: validate(json.example), errors: validate.errors ?? null }).toEqual({ where, ok: true, errors: null });
      }
    }
  });

  it("refuses what the server refuses: a step of no known type, a trigger that is a number, an unknown scope", () => {
    const step = validatorOf("components/schemas/StepInput");
    expect(step({ type: "delay", duration_ms: 1000 })).toBe(true);
    expect(step({ type: "teleport" })).toBe(false);
    expect(step({ type: "delay", duration_ms: 1000, url: "https://example.com" })).toBe(false);
    expect(validatorOf("components/schemas/Trigger")(42)).toBe(false);
    expect(validatorOf("components/schemas/Scope")("everything")).toBe(false);
  });
});
