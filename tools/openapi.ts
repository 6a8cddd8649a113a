import { writeFileSync } from "node:fs";
import { SERVICE_SCHEMAS } from "../services";
import { ROUTES } from "../services/gateway/routes";
import { openApiDocument } from "../app/openapi";

/**
 * `npm run openapi`: writes the API reference (what GET /v1/openapi.json answers) to the file named
 * (default clients/typescript/openapi.json), for the client's generator and Redocly's linter.
 */
export const documentText = (): string => `${JSON.stringify(openApiDocument(ROUTES, SERVICE_SCHEMAS), null, 2)}\n`;

if (require.main === module) writeFileSync(process.argv[2] ?? "clients/typescript/openapi.json", documentText());
