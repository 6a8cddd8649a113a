import { request } from "undici";
import { ROUTES } from "../../services/gateway/routes";
import { usePlatform } from "../helpers/platform";

const suite = usePlatform();
let doc: any;
beforeAll(async () => {
  const res = await request(`${suite.p.baseUrl}/openapi.json`);
  expect(res.statusCode).toBe(200);
  doc = await res.body.json();
});

describe("the API reference at /v1/openapi.json", () => {
  it("is an OpenAPI 3.1 document, served without a key", () => {
    expect(doc.openapi).toBe("3.1.0");
    expect(doc.servers).toMatchObject([{ url: "/v1" }]);
    expect(doc.components.securitySchemes.bearer).toMatchObject({ type: "http", scheme: "bearer" });
  });

  it("has every route of the gateway's table, with its scope and path parameters, and nothing else", () => {
    for (const route of ROUTES) {
      const op = doc.paths[route.path]?.[route.method.toLowerCase()];
      expect({ route: `${route.method} ${route.path}`, documented: Boolean(op) }).toEqual({
        route: `${route.method} ${route.path}`,
        documented: true,
      });
      expect(op.security).toEqual(route.inbound ? [] : [{ bearer: route.scope === null ? [] : [route.scope] }]);
      const inPath = [...route.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      expect((op.parameters ?? []).filter((p: any) => p.in === "path").map((p: any) => p.name)).toEqual(inPath);
      expect(Object.keys(op.responses)).toContain(String(route.status ?? 200));
    }
    const documented = Object.entries(doc.paths).flatMap(([path, ops]: [string, any]) =>
      Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`),
    );
    expect(documented.sort()).toEqual(ROUTES.map((r) => `${r.method} ${r.path}`).sort());
  });

  it("describes parameters from the actions' validation schemas", () => {
    const createHook = doc.paths["/webhooks"].post.requestBody.content["application/json"].schema;
    expect(createHook.required.sort()).toEqual(["events", "url"]);
    expect(createHook.additionalProperties).toBe(false);
    expect(createHook.properties.url).toMatchObject({ type: "string", maxLength: 2048 });
    const listWorkflows = doc.paths["/workflows"].get.parameters.map((p: any) => [p.name, p.in, p.required]);
    expect(listWorkflows).toEqual(
      expect.arrayContaining([
        ["page", "query", false],
        ["per_page", "query", false],
        ["status", "query", false],
      ]),
    );
    const usage = doc.paths["/analytics/usage"].get.parameters.find((p: any) => p.name === "granularity");
    expect(usage.schema).toMatchObject({ type: "string", enum: ["hour", "day"], default: "hour" });
    expect(doc.paths["/workflows/{id}/runs"].post.requestBody.content["application/json"].schema.properties.input).toMatchObject({
      type: "object",
    });
    expect(doc.components.schemas.Error.properties.error.properties.code.enum).toContain("parameter_invalid");
  });

  it("describes every field of a run, its steps and attempts, and its version's steps that the dashboard's run page reads", () => {
    const schemas = doc.components.schemas;
    const fields = (schema: any) => Object.keys(schema.properties).sort();
    expect(fields(schemas.Run)).toEqual(
      expect.arrayContaining(["status", "steps", "pending_approval", "stop_message", "timeout_ms", "deadline_at", "workflow_version"]),
    );
    expect(schemas.Run.properties.deadline_at).toMatchObject({ type: ["string", "null"], format: "date-time" });
    expect(fields(schemas.RunStep)).toEqual(
      expect.arrayContaining([
        "status",
        "attempt_count",
        "attempts",
        "error",
        "error_code",
        "timeout_at",
        "started_at",
        "finished_at",
        "output",
      ]),
    );
    expect(schemas.RunStep.properties.status.enum).toContain("skipped");
    expect(fields(schemas.RunStep.properties.attempts.items)).toEqual(["attempt", "error", "finished_at", "started_at", "status_code"]);
    for (const kind of ["HttpStep", "DelayStep", "ApprovalStep", "EmitStep", "StopStep", "SetStep"])
      expect({ kind, if: fields(schemas[kind]).includes("if") }).toEqual({ kind, if: true });
    expect(fields(schemas.HttpStep)).toEqual(expect.arrayContaining(["retry", "retries", "on_error"]));
    expect(fields(schemas.ApprovalStep)).toEqual(expect.arrayContaining(["timeout_ms", "on_error"]));
    expect(fields(schemas.WorkflowVersion)).toEqual(expect.arrayContaining(["steps", "timeout_ms"]));
  });
});
