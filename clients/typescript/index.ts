import createClient, { type Client, type ClientOptions } from "openapi-fetch";
import type { components, paths } from "./schema.js";

/**
 * The platform's API as typed calls: `openapi-fetch` over the types openapi-typescript generates
 * from the API reference (schema.ts, made by `npm run openapi`; never edit it by hand).
 *
 *   const api = platformClient("https://api.example.com/v1", process.env.SVC_KEY!);
 *   const { data: wf } = await api.POST("/workflows", { body: { name: "Ship", trigger: { type: "manual" }, steps: [{ type: "delay", duration_ms: 1000 }] } });
 *   const { data: run } = await api.POST("/workflows/{id}/runs", { params: { path: { id: wf!.data.id } }, body: { input: {} } });
 */
export type PlatformClient = Client<paths>;
export type Schemas = components["schemas"];
export type { components, paths };

export function platformClient(baseUrl: string, key: string, options: Omit<ClientOptions, "baseUrl"> = {}): PlatformClient {
  return createClient<paths>({ ...options, baseUrl, headers: { ...options.headers, Authorization: `Bearer ${key}` } });
}
