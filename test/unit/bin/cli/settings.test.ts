import { readFileSync } from "node:fs";
import { join } from "node:path";
import { CLI_SETTING_NAMES, loadCliSettings } from "../../../../bin/cli/settings";
import { SettingsError } from "../../../../shared/config";

describe("the CLI's settings", () => {
  it("each has a row in the Configuration table of docs/operations", () => {
    const readme = readFileSync(join(__dirname, "../../../../docs/operations/README.md"), "utf8");
    for (const name of CLI_SETTING_NAMES) expect({ name, listed: readme.includes(`| \`${name}\` |`) }).toEqual({ name, listed: true });
  });

  it("default to the server on this machine's PORT; flags win over the environment; /v1 is added when missing", () => {
    expect(loadCliSettings({}, { PORT: "4100" })).toMatchObject({ apiUrl: "http://127.0.0.1:4100/v1", apiKey: undefined });
    expect(loadCliSettings({}, { API_URL: "https://api.example.com/", API_KEY: " k " })).toMatchObject({
      apiUrl: "https://api.example.com/v1",
      apiKey: "k",
    });
    expect(loadCliSettings({ "api-url": "http://h:1/v1", "api-key": "f" }, { API_URL: "http://other", API_KEY: "e" })).toMatchObject({
      apiUrl: "http://h:1/v1",
      apiKey: "f",
    });
  });

  it("name the setting a bad value is in, and the server's settings are checked too", () => {
    expect(() => loadCliSettings({}, { API_URL: "not a url" })).toThrow(new SettingsError("API_URL", "'not a url' is not a URL"));
    expect(() => loadCliSettings({}, { API_URL: "ftp://x" })).toThrow(SettingsError);
    expect(() => loadCliSettings({}, { PORT: "x" })).toThrow(/Invalid setting PORT/);
  });
});
