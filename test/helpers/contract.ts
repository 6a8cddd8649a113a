import Ajv2020, { type ValidateFunction } from "ajv/dist/2020";
import addFormats from "ajv-formats";
import { openApiDocument } from "../../app/openapi";
import { SERVICE_SCHEMAS } from "../../services";
import { matchRoute, ROUTES } from "../../services/gateway/routes";

/**
 * Every answer a test gets checked against the API reference: its status must be one the operation
 * documents and its body must validate (ajv) against that status's schema. `api()` applies it to
 * every response of every API test, so a document that says less or other than the server does
 * fails the suite.
 */
type Json = Record<string, any>;

export const DOCUMENT: Json = openApiDocument(ROUTES, SERVICE_SCHEMAS);

// `discriminator` and OpenAPI's own keywords are annotations here: ajv checks `oneOf` itself.
const ajv = new Ajv2020({ strict: false, allErrors: true, discriminator: false });
addFormats(ajv);
ajv.addSchema(DOCUMENT, "api");

const pointer = (...parts: string[]) => parts.map((p) => p.replace(/~/g, "~0").replace(/\//g, "~1")).join("/");
const compiled = new Map<string, ValidateFunction>();

/** The operation a request reaches, or undefined for paths no route has (404/405 answers, served outside the table). */
export function operationOf(method: string, path: string): { template: string; op: Json } | undefined {
  const bare = path.split("?")[0];
  const match = matchRoute(method.toUpperCase(), bare);
  if (!match.route) return undefined;
  const op = DOCUMENT.paths[match.route.path]?.[method.toLowerCase()];
  return op ? { template: match.route.path, op } : undefined;
}

/** What is wrong with an answer, by the document; empty when it conforms. */
export function contractProblems(
  method: string,
  path: string,
  res: { status: number; headers: Record<string, unknown>; body: unknown },
): string[] {
  const found = operationOf(method, path);
  if (!found) return [];
  const where = `${method} ${path} → ${res.status}`;
  let response = found.op.responses[String(res.status)];
  if (!response) return [`${where}: status ${res.status} is not documented (documented: ${Object.keys(found.op.responses).join(", ")})`];
  let responsePointer = pointer("paths", found.template, method.toLowerCase(), "responses", String(res.status));
  if (response.$ref) {
    responsePointer = response.$ref.slice(2);
    response = DOCUMENT.components.responses[response.$ref.split("/").pop()];
  }
  const problems: string[] = [];
  for (const name of Object.keys(response.headers ?? {})) {
    const required = ["Request-Id", "Location"].includes(name) || (name === "Retry-After" && res.status === 429);
    if (required && res.headers[name.toLowerCase()] === undefined) problems.push(`${where}: no ${name} header`);
  }
  if (res.headers.location !== undefined && !response.headers?.Location) problems.push(`${where}: an undocumented Location header`);
  const json = response.content?.["application/json"];
  if (!json) return problems;
  const validate = validatorOf(`${responsePointer}/content/application~1json/schema`);
  if (!validate(res.body)) {
    problems.push(`${where}: the body does not match the document: ${ajv.errorsText(validate.errors, { separator: "; " })}`);
    problems.push(`  body: ${JSON.stringify(res.body).slice(0, 600)}`);
  }
  return problems;
}

/** A validator for any schema of the document, by JSON pointer (`components/schemas/Workflow`). */
export function validatorOf(schemaPointer: string): ValidateFunction {
  let validate = compiled.get(schemaPointer);
  if (!validate) {
    validate = ajv.compile({ $ref: `api#/${schemaPointer}` });
    compiled.set(schemaPointer, validate);
  }
  return validate;
}

export { ajv };
