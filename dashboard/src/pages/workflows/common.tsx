import type { Actor } from "../../../../shared/api/wire";
import type { Run, Workflow } from "../../api";
import { href } from "../../session";

export const startedBy = (r: Run) =>
  r.trigger.type === "event" ? (
    <a href={href("events", r.trigger.event_id ?? "")}>{r.trigger.event_type}</a>
  ) : r.trigger.type === "webhook" ? (
    "inbound webhook"
  ) : (
    "manual"
  );

export const triggerText = (wf: Workflow) =>
  wf.trigger.type === "event"
    ? `on ${wf.trigger.event_type}`
    : wf.trigger.type === "webhook"
      ? `inbound webhook (${wf.trigger.verify.scheme})`
      : "manual";

/** A hook's address and what it received (counted about once a second). */
export const hookText = (wf: Workflow) =>
  wf.hook &&
  `${wf.hook.url} · ${wf.hook.accepted} accepted, ${wf.hook.duplicates} duplicates, ${wf.hook.filtered} filtered, ${wf.hook.refused} refused` +
    (wf.hook.last_refused_reason ? ` (last: ${wf.hook.last_refused_reason})` : "");

/** The key that did something, by name (and id, to tell keys of one name apart). */
export const actorText = (a: Actor) => `${a.key_name ?? "a key"} (${a.key_id})`;

/** What the server takes as an approval's comment, at most. */
export const COMMENT_MAX = 1000;
