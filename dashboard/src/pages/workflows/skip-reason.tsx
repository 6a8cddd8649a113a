import type { SkipReason } from "./run-facts.logic";

/** Why a skipped step did not run, in words: its condition was false, or the run ended before it. */
export function SkipReasonText({ why, class: className }: { why: SkipReason; class: string }) {
  if (why.kind === "condition")
    return (
      <p class={className}>
        Skipped: its condition was false
        {why.condition !== null && (
          <>
            {" "}
            (<code>if: {why.condition}</code>)
          </>
        )}
        .
      </p>
    );
  return (
    <p class={className}>
      Not run: the run ended
      {why.at !== null && (
        <>
          {" "}
          at step <code>{why.at}</code>
        </>
      )}{" "}
      before it.
    </p>
  );
}
