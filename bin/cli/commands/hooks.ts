import { readFileSync } from "node:fs";
import type { HookVerify } from "../../../shared/api/wire";
import { inboundSignature, isSignedScheme, SIGNED_SCHEMES } from "../../../shared/net/inbound-signing";
import { optional, seg, UsageError, type Command, type Ctx } from "../command";
import { ApiCallError } from "../http";
import { safe } from "../printable.logic";

const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$/;

/** `--header K:V`, each: lower-case names, the value trimmed. */
function headersOf(c: Ctx): Record<string, string> {
  const given = c.values.header;
  const list = Array.isArray(given) ? given : typeof given === "string" ? [given] : [];
  const headers: Record<string, string> = {};
  for (const entry of list) {
    const at = entry.indexOf(":");
    const name = at > 0 ? entry.slice(0, at).trim() : "";
    if (!HEADER_NAME.test(name)) throw new UsageError(`--header must be NAME:VALUE, such as x-github-event:push (got '${entry}')`);
    headers[name.toLowerCase()] = entry.slice(at + 1).trim();
  }
  return headers;
}

/** The body exactly as it is sent: `--file`'s bytes, `--data`'s text (JSON), or `{}`. */
function bodyOf(c: Ctx): string {
  const file = optional(c, "file");
  const data = optional(c, "data");
  if (file !== undefined && data !== undefined) throw new UsageError("give --data or --file, not both");
  if (file !== undefined) {
    try {
      return readFileSync(file, "utf8");
    } catch (err) {
      throw new UsageError(`--file: ${(err as Error).message}`);
    }
  }
  if (data === undefined) return "{}";
  try {
    JSON.parse(data);
  } catch {
    throw new UsageError("--data must be JSON (for another body, use --file with --header content-type:…)");
  }
  return data;
}

/** The receipt for people: a run started, the first run of a duplicate, or nothing the filter wanted. */
function describeReceipt(status: number, r: { run_id: string | null; duplicate: boolean; filtered: boolean }): string {
  if (r.filtered) return `filtered (${status}): the hook's filter passed over the request; no run started`;
  if (r.duplicate) return safe`duplicate (${status}): answered with the first request's run ${r.run_id ?? ""}`;
  return safe`accepted (${status}): run ${r.run_id ?? ""} started`;
}

/** A hook for people: where to send, how it verifies, and what it received. */
function describeHook(url: string, scheme: string, h: any): string {
  const previous = h.previous_secret_expires_at ? safe`; the replaced one is accepted until ${h.previous_secret_expires_at}` : "";
  const lines = [
    safe`${h.id}  POST ${url}`,
    safe`verify ${scheme}, secret ${h.secret_source ?? "none"}` + previous,
    safe`accepted ${h.accepted}, filtered ${h.filtered}, duplicates ${h.duplicates}, refused ${h.refused}`,
  ];
  if (h.last_accepted_at) lines.push(safe`last accepted ${h.last_accepted_at}`);
  if (h.last_refused_at) lines.push(safe`last refused ${h.last_refused_at} (${h.last_refused_reason ?? "?"})`);
  return lines.join("\n");
}

/** The workflow behind a hook: a usage error when its trigger is not a webhook one. */
async function hookWorkflow(c: Ctx): Promise<any> {
  const { data: wf } = await c.api().call("GET", `/workflows/${seg(c.positionals[0])}`);
  if (wf.trigger?.type !== "webhook" || !wf.hook)
    throw new UsageError(safe`workflow ${wf.id} has a ${String(wf.trigger?.type)} trigger: only a webhook trigger has a hook`);
  return wf;
}

export const HOOK_COMMANDS: Record<string, Command> = {
  "hooks get": {
    args: "WORKFLOW_ID",
    summary: "a webhook-triggered workflow's hook: its URL, scheme and what it accepted and refused",
    details: "Counts are stored about once a second.",
    positionals: 1,
    async run(c) {
      const wf = await hookWorkflow(c);
      c.out.line(wf.hook, describeHook(`${c.api().url}/hooks/${wf.hook.id}`, wf.trigger.verify?.scheme, wf.hook));
    },
  },
  "hooks rotate-secret": {
    args: "WORKFLOW_ID",
    summary: "a new secret for the hook, printed once; the old one is still accepted for 24 h",
    details: "A hook verifying with {{secrets.NAME}} rotates by replacing that secret (POST /secrets) instead.",
    positionals: 1,
    async run(c) {
      const { data } = await c.api().call("POST", `/workflows/${seg(c.positionals[0])}/hook/rotate-secret`);
      const until = data.previous_secret_expires_at ? safe`; the old one is accepted until ${data.previous_secret_expires_at}` : "";
      c.out.line(data, safe`${data.id}  new secret: ${data.secret} (shown once)` + until);
    },
  },
  "hooks test": {
    args: "WORKFLOW_ID [--secret SECRET] [--data JSON | --file PATH] [--header NAME:VALUE ...]",
    summary: "send a correctly signed request to a webhook-triggered workflow's hook, and print the answer",
    details: [
      "Reads the workflow (workflows:read) for its hook and verify scheme, signs the body as that scheme's",
      `providers do (${SIGNED_SCHEMES.join(", ")})`,
      "and POSTs it to the hook, without the API key.",
      "--secret: the hook's secret (the hook_secret shown when it was made, or the value of the stored",
      "  {{secrets.NAME}} it verifies with); env HOOK_SECRET keeps it off the command line.",
      "  Scheme none needs none.",
      "--data: a JSON body (default {}); --file: the file's bytes exactly. Sent as application/json unless",
      "  --header content-type:… says otherwise. --header webhook-id:ID signs Standard Webhooks with that id.",
      "Exit 1 when the hook refuses the request (401 with its reason, 404, 413, 415, 429).",
    ].join("\n"),
    options: { secret: { type: "string" }, data: { type: "string" }, file: { type: "string" }, header: { type: "string", multiple: true } },
    positionals: 1,
    async run(c) {
      const extra = headersOf(c);
      const raw = bodyOf(c);
      const api = c.api();
      const wf = await hookWorkflow(c);
      const verify = wf.trigger.verify as HookVerify;
      if (!isSignedScheme(verify?.scheme))
        throw new UsageError(
          safe`the hook verifies with '${String(verify?.scheme)}', a scheme this CLI cannot sign (it signs ${SIGNED_SCHEMES.join(", ")})`,
        );
      const secret = optional(c, "secret") ?? (process.env.HOOK_SECRET || undefined);
      if (verify.scheme !== "none" && (secret === undefined || secret === ""))
        throw new UsageError(
          `--secret is required: the hook verifies with ${verify.scheme} (${wf.hook.secret_source === "generated" ? "the hook_secret shown when the hook was made" : safe`the value of ${wf.hook.secret_source}`})`,
        );
      if (verify.scheme === "none" && secret !== undefined) c.out.warn("the hook verifies nothing (scheme none): the secret is not used");
      const signed = inboundSignature(verify, secret ?? "", raw, { id: extra["webhook-id"] });
      const headers = { "content-type": "application/json", ...extra, ...signed };
      const names = Object.keys(signed);
      const sent = safe`POST ${api.url}/hooks/${wf.hook.id} ${names.length > 0 ? `signed ${verify.scheme} (${names.join(", ")})` : "unsigned (scheme none)"}`;
      const { status, data } = await api.send(`/hooks/${seg(wf.hook.id)}`, raw, headers).catch((err: unknown) => {
        if (err instanceof ApiCallError && err.status === 401 && verify.scheme !== "none")
          throw new ApiCallError(err.status, err.code, `${err.message} (is --secret the hook's current secret?)`);
        throw err;
      });
      c.out.line(data, `${sent}\n${describeReceipt(status, data)}`);
    },
  },
};
