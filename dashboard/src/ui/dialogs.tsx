import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { useAction } from "./data";

/**
 * A rotate-secret action (webhooks, workflows): `begin()` opens a confirmation saying what the
 * 24-hour overlap means for `signs` (its receivers), then the new secret is shown once; `error` is the
 * call's, and `dialogs` goes where the page shows them.
 */
export function useSecretRotation<R>(opts: {
  rotate(): Promise<R>;
  secretOf(answer: R): string | null | undefined;
  signs: string;
  action: string;
}) {
  const [rotating, setRotating] = useState(false);
  const [secret, setSecret] = useState<string | null>(null);
  const rotate = useAction(opts.rotate);
  const dialogs = (
    <>
      {secret && <SecretOnce label="New signing secret" value={secret} onDone={() => setSecret(null)} />}
      {rotating && (
        <Confirm
          title="Rotate the signing secret?"
          body={<p>{opts.signs}</p>}
          action={opts.action}
          pending={rotate.pending}
          onCancel={() => setRotating(false)}
          onConfirm={async () => {
            const answer = await rotate.go();
            setRotating(false);
            const next = answer === undefined ? undefined : opts.secretOf(answer);
            if (next) setSecret(next);
          }}
        />
      )}
    </>
  );
  return { begin: () => (setRotating(true), setSecret(null)), error: rotate.error, dialogs };
}

/** A secret the API shows once: visible, selectable, with a copy button and a plain warning. */
export function SecretOnce({ label, value, onDone }: { label: string; value: string; onDone(): void }) {
  const [copied, setCopied] = useState<"yes" | "no" | null>(null);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(value);
      setCopied("yes");
    } catch {
      setCopied("no");
    }
  };
  return (
    <article class="secret" aria-labelledby="secret-title">
      <h3 id="secret-title">{label}</h3>
      <p>Copy it now: it is shown only this once and cannot be read again.</p>
      <div role="group" class="secret-row">
        <input readOnly aria-label={label} value={value} onFocus={(e) => (e.target as HTMLInputElement).select()} data-secret />
        <button type="button" onClick={copy}>
          Copy
        </button>
      </div>
      <p role="status" class="muted">
        {copied === "yes"
          ? "Copied to the clipboard."
          : copied === "no"
            ? "The browser refused the clipboard: select the text and copy it."
            : ""}
      </p>
      <button type="button" class="secondary" onClick={onDone}>
        I have saved it
      </button>
    </article>
  );
}

/** A modal question (native <dialog>: focus stays inside, Escape cancels). */
export function Confirm({
  title,
  body,
  action,
  tone,
  onConfirm,
  onCancel,
  pending,
}: {
  title: string;
  body: ComponentChildren;
  action: string;
  tone?: "danger";
  pending?: boolean;
  onConfirm(): void;
  onCancel(): void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const dialog = ref.current;
    if (dialog && !dialog.open) dialog.showModal();
    return () => dialog?.close();
  }, []);
  return (
    <dialog ref={ref} aria-labelledby="confirm-title" onCancel={(e) => (e.preventDefault(), onCancel())}>
      <article>
        <h3 id="confirm-title">{title}</h3>
        <div>{body}</div>
        <footer>
          <button type="button" class="secondary" onClick={onCancel}>
            Cancel
          </button>
          <button type="button" class={tone === "danger" ? "danger" : ""} aria-busy={pending} disabled={pending} onClick={onConfirm}>
            {action}
          </button>
        </footer>
      </article>
    </dialog>
  );
}
