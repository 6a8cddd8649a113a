import type { HookRequest } from "../../../../shared/api/wire";

/** Why a hook refused a request, in words (`reason`, as `last_refused_reason` names it). */
export const REFUSAL_TEXT: Record<string, string> = {
  missing_signature: "no signature in the headers the hook's scheme reads",
  malformed_signature: "the signature headers are malformed",
  bad_signature: "the signature does not match the body (wrong secret, or a changed body)",
  stale_timestamp: "the signed timestamp is outside the hook's tolerance (a replay, or a clock off)",
  secret_unavailable: "the stored secret the hook verifies with cannot be read",
};

/** What became of a request, in a line (the run, if any, is linked beside it). */
export function requestText(r: Pick<HookRequest, "outcome" | "reason">): string {
  switch (r.outcome) {
    case "accepted":
      return "started run";
    case "duplicate":
      return "repeated a dedupe key: answered with the first run";
    case "filtered":
      return "the filter passed over it: no run";
    case "refused":
      return r.reason ? `${r.reason}: ${REFUSAL_TEXT[r.reason] ?? "refused"}` : "refused";
  }
}
