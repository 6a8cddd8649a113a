import type { ComponentChildren } from "preact";
import type { ApiFailure } from "../api";
import type { ApiState } from "./data";

export function Loading({ what }: { what: string }) {
  return (
    <p aria-busy="true" class="muted">
      Loading {what}…
    </p>
  );
}

export function ErrorNotice({ error, retry }: { error: ApiFailure | null; retry?: () => void }) {
  if (!error) return null;
  return (
    <div role="alert" class="notice error">
      <strong>{error.message}</strong>
      <small>
        {error.code}
        {error.status > 0 && ` · HTTP ${error.status}`}
        {error.requestId && ` · ${error.requestId}`}
      </small>
      {retry && (
        <button type="button" class="outline secondary small" onClick={retry}>
          Try again
        </button>
      )}
    </div>
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <div class="notice empty">{children}</div>;
}

/** The three states of a loaded list or item, then the content. */
export function Loaded<T>({ state, what, children }: { state: ApiState<T>; what: string; children: (data: T) => ComponentChildren }) {
  if (state.error && state.data === null) return <ErrorNotice error={state.error} retry={state.reload} />;
  if (state.data === null) return <Loading what={what} />;
  return (
    <>
      {state.error && <ErrorNotice error={state.error} retry={state.reload} />}
      {children(state.data)}
    </>
  );
}

/** Says what a key lacks instead of offering a button that can only fail. */
export function NeedsScope({ scope }: { scope: string }) {
  return (
    <p class="muted small">
      Your key cannot change this: it needs the <code>{scope}</code> scope.
    </p>
  );
}

export function FieldError({ error, param }: { error: ApiFailure | null; param: string }) {
  if (!error || error.param !== param) return null;
  return <small id={`${param}-error`}>{error.message}</small>;
}
