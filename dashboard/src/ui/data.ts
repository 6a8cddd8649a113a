import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { ApiFailure, call, pathWith, type PageMeta, type Query } from "../api";
import { useAccount } from "./account";

/** What `useApi` keeps of a GET: the answer, its paging, the error, and a way to ask again. */
export interface ApiState<T> {
  loading: boolean;
  error: ApiFailure | null;
  data: T | null;
  meta: PageMeta | null;
  reload(): void;
}

/**
 * GETs `path` with `query` and keeps the answer. `pollMs` refreshes it in the background (no loading
 * state, an error kept until the next success), which is how new deliveries and run steps appear.
 */
export function useApi<T>(path: string | null, query?: Query, pollMs?: number): ApiState<T> {
  const { key } = useAccount();
  const url = path === null ? null : pathWith(path, query);
  const [state, setState] = useState<{
    url: string | null;
    data: T | null;
    meta: PageMeta | null;
    error: ApiFailure | null;
    loading: boolean;
  }>({
    url: null,
    data: null,
    meta: null,
    error: null,
    loading: true,
  });
  const [tick, setTick] = useState(0);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  const background = useRef(false);

  useEffect(() => {
    if (url === null) return;
    let live = true;
    const quiet = background.current;
    background.current = false;
    if (!quiet) setState((s) => ({ ...s, url, loading: true, error: null, ...(s.url !== url && { data: null, meta: null }) }));
    call<any>(key, "GET", url).then(
      (answer) => {
        if (!live) return;
        const list = answer && typeof answer === "object" && "meta" in answer && Array.isArray(answer.data);
        setState({ url, loading: false, error: null, data: list ? answer.data : answer, meta: list ? answer.meta : null });
      },
      (err: ApiFailure) => live && setState((s) => ({ ...s, url, loading: false, error: err })),
    );
    return () => {
      live = false;
    };
  }, [key, url, tick]);

  useEffect(() => {
    if (!pollMs || url === null) return;
    const timer = setInterval(() => {
      if (document.hidden) return;
      background.current = true;
      setTick((t) => t + 1);
    }, pollMs);
    return () => clearInterval(timer);
  }, [pollMs, url]);

  return {
    loading: state.loading,
    error: state.error,
    data: state.url === url ? state.data : null,
    meta: state.url === url ? state.meta : null,
    reload,
  };
}

/** Runs one write, keeping its pending state and error for the form or button that started it. */
export function useAction<A extends unknown[], R>(run: (...args: A) => Promise<R>) {
  const [pending, setPending] = useState(false);
  const [error, setError] = useState<ApiFailure | null>(null);
  const go = async (...args: A): Promise<R | undefined> => {
    setPending(true);
    setError(null);
    try {
      return await run(...args);
    } catch (err) {
      setError(err instanceof ApiFailure ? err : new ApiFailure(0, "client_error", (err as Error).message));
      return undefined;
    } finally {
      setPending(false);
    }
  };
  return { pending, error, go, clear: () => setError(null) };
}
