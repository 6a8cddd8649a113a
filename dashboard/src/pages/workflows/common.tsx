import type { Actor } from "../../../../shared/api/wire";
import type { Run, Workflow } from "../../api";
import { href } from "../../session";

export const startedBy = (r: Run) => {
  if (r.trigger.type === "event") return <a href={href("events", r.trigger.event_id ?? "")}>{r.trigger.event_type}</a>;
  if (r.trigger.type === "schedule") return `schedule (${r.trigger.source}, ${r.trigger.scheduled_at})`;
  if (r.trigger.type === "webhook") return "inbound webhook";
  if (r.trigger.type === "parent" && r.parent)
    return (
      <>
        step <code>{r.parent.step_id}</code> of run <code>{r.parent.run_id}</code>
      </>
    );
  return "manual";
};

export const triggerText = (wf: Workflow) => {
  const t = wf.trigger;
  if (t.type === "event") return `on ${t.event_type}`;
  if (t.type === "schedule") return "cron" in t ? `cron ${t.cron} (${t.timezone})` : `every ${t.every_ms} ms`;
  if (t.type === "webhook") return `inbound webhook (${t.verify.scheme})`;
  return "manual";
};

/** A hook's address and what it received (counted about once a second). */
export const hookText = (wf: Workflow) =>
  wf.hook &&
  `${wf.hook.url} · ${wf.hook.accepted} accepted, ${wf.hook.duplicates} duplicates, ${wf.hook.filtered} filtered, ${wf.hook.refused} refused` +
    (wf.hook.last_refused_reason ? ` (last: ${wf.hook.last_refused_reason})` : "");

/** The key that did something, by name (and id, to tell keys of one name apart). */
export const actorText = (a: Actor) => `${a.key_name ?? "a key"} (${a.key_id})`;

/** What the server takes as an approval's comment, at most. */
export const COMMENT_MAX = 1000;
