import type { Agent } from "undici";
import { describeJsonFault, parseJsonWithinLimits } from "../../shared/api/json-limits";
import { checkTargetUrl } from "../../shared/net/net-guard";
import { outbound, outboundAgent } from "../../shared/net/outbound";
import { standardHeaders } from "../../shared/net/signing";
import { chainHeader, SERVICE_CHAIN_HEADER } from "../../shared/records/chain";
import { childTraceparent } from "../../shared/runtime/trace";
import type { ReadView } from "../../shared/storage/types";
import { cutAnswer } from "./outputs";
import type { Attempt, HttpRequest } from "./http-step.logic";
import type { RunDoc } from "./run-doc";
import { notAnswered, urlRefused } from "./step-errors";
import { signingSecrets, type HttpStep, type WorkflowDoc } from "./workflows.logic";

/** Bytes of an http step's answer kept as its output. */
const ANSWER_LIMIT = 64 * 1024;

/**
 * What a run's requests carry of where it came from, over any value of the step's: the trace it
 * belongs to, and for an event-started run its chain, so that an event it posts to the platform
 * goes on the chain (shared/records/chain.ts). Undefined when there is neither.
 */
function carriedHeaders(run: RunDoc): Record<string, string> | undefined {
  if (!run.traceparent && run.chain_root === undefined) return undefined;
  return {
    ...(run.traceparent && { traceparent: childTraceparent(run.traceparent) }),
    ...(run.chain_root !== undefined && {
      [SERVICE_CHAIN_HEADER]: chainHeader({ chain_root: run.chain_root, chain_depth: run.chain_depth ?? 0 }),
    }),
  };
}

/**
 * The http attempts of the engine's runs (engine.ts): signed, carrying the run's trace and chain,
 * checked against the target rules, over keep-alive connections. What an attempt answers is what
 * the run stores: the server's answer and an error in the engine's own words (step-errors.ts).
 */
export class HttpAttempts {
  private readonly agent: Agent;

  constructor(
    /** Read for the signing secrets of a run's workflow, at each attempt (a rotation applies at once). */
    private readonly workflows: ReadView<WorkflowDoc>,
    private readonly allowPrivate: boolean,
  ) {
    this.agent = outboundAgent(allowPrivate, { keepAliveMs: 10_000 });
  }

  close(): Promise<void> {
    return this.agent.close();
  }

  /**
   * The headers a receiver checks a step's request by: `Idempotency-Key` (unless the step sets its
   * own) and `webhook-id`, both `<run id>:<step id>`, the same on every attempt and every
   * re-execution after a crash; the Standard Webhooks signature under the workflow's signing secrets.
   */
  private async signed(run: RunDoc, request: HttpRequest): Promise<Record<string, string>> {
    const id = `${run.id}:${run.definition[run.cursor].id}`;
    const workflow = await this.workflows.get({ org_id: run.org_id, environment: run.environment }, run.workflow_id);
    const secrets = workflow ? signingSecrets(workflow, Date.now()) : [];
    return {
      "idempotency-key": id,
      ...request.headers,
      ...(secrets.length > 0 && standardHeaders(id, request.body ?? "", secrets)),
    };
  }

  /** One attempt of an http step: `request` as the step's fields filled it, with what the run carries added. */
  async attempt(run: RunDoc, filled: HttpRequest): Promise<Attempt> {
    const carried = carriedHeaders(run);
    const request = carried ? { ...filled, headers: { ...filled.headers, ...carried } } : filled;
    const { url, method, body, timeoutMs } = request;
    const { environment } = run;
    const headers = await this.signed(run, request);
    // Failures quote the step's URL template, never the filled URL (step-errors.ts).
    const template = (run.definition[run.cursor] as HttpStep).url;
    try {
      await checkTargetUrl(url, { allowPrivate: this.allowPrivate, environment });
    } catch (err) {
      return { ok: false, output: null, error: urlRefused(template, (err as Error).message) };
    }
    const res = await outbound(this.agent, url, { method, headers, body, timeoutMs, keep: ANSWER_LIMIT });
    if (!res.answered) {
      const timedOut = / within \d+ ms$/.test(res.error);
      return { ok: false, output: null, error: notAnswered(template, res.error), ms: res.ms, timed_out: timedOut };
    }
    let parsed: unknown = res.text;
    let refused: string | null = null;
    // Longer than what is read of it: not kept, the output says so (outputs.ts).
    const cut = res.bytes > ANSWER_LIMIT;
    if (!cut && res.contentType.includes("json")) {
      // Held to the limits of a request body (shared/api/json-limits.ts): an answer nested too deep or
      // holding lone surrogates (which no UTF-8 store holds as they are) is not stored, and fails
      // the attempt like a bad status, under the step's retries. Not JSON after all: kept as text.
      const checked = parseJsonWithinLimits(res.text);
      if (checked.ok) parsed = checked.value;
      else if (checked.kind !== "invalid_json") {
        parsed = null;
        refused = `the answer's JSON is ${describeJsonFault(checked)}`;
      }
    }
    const good = res.status >= 200 && res.status < 300;
    const ok = good && refused === null;
    const error = ok ? null : good ? refused : `the server answered ${res.status}${refused ? `; ${refused}` : ""}`;
    return {
      ok,
      output: cut ? cutAnswer(res.status, res.text, res.bytes) : { status_code: res.status, body: parsed },
      error,
      status_code: res.status,
      ms: res.ms,
      ...(res.retryAfter !== undefined && { retry_after: res.retryAfter }),
    };
  }
}
