/** The CLI's calls to the API: the answer's `data` (and `meta`), or an ApiCallError with the contract's error. */
export class ApiCallError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** Seconds to wait before asking again, from a 429's or 503's Retry-After. */
    readonly retryAfter?: number,
  ) {
    super(message);
    this.name = "ApiCallError";
  }
}

export interface Api {
  readonly url: string;
  call<T = any>(method: string, path: string, body?: unknown): Promise<{ data: T; meta?: any }>;
  /** POSTs `raw` exactly, with `headers` and without the API key (an inbound webhook): the status and the answer. */
  send<T = any>(path: string, raw: string, headers: Record<string, string>): Promise<{ status: number; data: T }>;
  /** The raw response of a GET (a stream). */
  open(path: string, signal: AbortSignal): Promise<Response>;
}

async function reachApi(url: string, path: string, init: RequestInit): Promise<Response> {
  try {
    return await fetch(`${url}${path}`, init);
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    throw new ApiCallError(
      0,
      "unreachable",
      `Cannot reach the API at ${url} (${cause?.code ?? cause?.message ?? String(err)}): is the server running? (API_URL / --api-url)`,
    );
  }
}

/** A response's `{data, meta}`, or its contract error as an ApiCallError. */
async function answerOf(res: Response): Promise<{ data: any; meta?: any }> {
  const text = await res.text();
  let parsed: any;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ApiCallError(res.status, "bad_answer", `The API answered ${res.status} with a body that is not JSON`);
  }
  if (!res.ok) {
    const e = parsed?.error ?? {};
    const retryAfter = Number(res.headers.get("retry-after") ?? NaN);
    throw new ApiCallError(
      res.status,
      e.code ?? "error",
      `${res.status} ${e.code ?? ""}: ${e.message ?? text}`.trim(),
      Number.isFinite(retryAfter) ? retryAfter : undefined,
    );
  }
  return parsed;
}

export function apiClient(url: string, key: string | undefined): Api {
  const headers = (): Record<string, string> => {
    if (!key) throw new ApiCallError(0, "missing_api_key", "No API key: pass --api-key or set API_KEY");
    return { authorization: `Bearer ${key}` };
  };
  const reach = (path: string, init: RequestInit) => reachApi(url, path, init);
  return {
    url,
    async call(method, path, body) {
      const res = await reach(path, {
        method,
        headers: { ...headers(), ...(body !== undefined && { "content-type": "application/json" }) },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      });
      return answerOf(res);
    },
    async send(path, raw, sent) {
      const res = await reach(path, { method: "POST", headers: sent, body: raw });
      return { status: res.status, ...(await answerOf(res)) };
    },
    async open(path, signal) {
      const res = await reach(path, { headers: { ...headers(), accept: "text/event-stream" }, signal });
      if (!res.ok) {
        const parsed = (await res.json().catch(() => ({}))) as { error?: { code?: string; message?: string } };
        throw new ApiCallError(
          res.status,
          parsed.error?.code ?? "error",
          `${res.status} ${parsed.error?.code ?? ""}: ${parsed.error?.message ?? ""}`,
        );
      }
      return res;
    },
  };
}
