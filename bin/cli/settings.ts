import { loadSettings, SettingsError, type Settings } from "../../shared/config";

/**
 * The CLI's own settings, beside the server's (loadSettings: DATA_DIR, MONGO_URL, PORT, …), read
 * the same way: from the environment, checked once, a bad value named. Flags win over them.
 */
export const CLI_SETTING_NAMES = ["API_URL", "API_KEY"] as const;

export interface CliSettings {
  server: Settings;
  /** The API's base URL, ending in /v1 (default: this machine's server on PORT). */
  apiUrl: string;
  apiKey: string | undefined;
}

export function loadCliSettings(flags: { "api-url"?: string; "api-key"?: string }, env = process.env): CliSettings {
  const server = loadSettings(env);
  const raw = (flags["api-url"] ?? env.API_URL)?.trim() || `http://127.0.0.1:${server.port}/v1`;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new SettingsError("API_URL", `'${raw}' is not a URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new SettingsError("API_URL", `'${raw}' is not an http(s) URL`);
  const path = url.pathname.replace(/\/+$/, "");
  const apiUrl = `${url.origin}${path.endsWith("/v1") ? path : `${path}/v1`}`;
  const apiKey = (flags["api-key"] ?? env.API_KEY)?.trim() || undefined;
  return { server, apiUrl, apiKey };
}
