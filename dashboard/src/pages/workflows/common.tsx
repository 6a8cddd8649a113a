import type { Actor } from "../../../../shared/api/wire";
import type { Run, Workflow } from "../../api";
import { href } from "../../session";

export const startedBy = (r: Run) =>
  r.trigger.type === "event" ? (
    <a href={href("events", r.trigger.event_id ?? "")}>{r.trigger.event_type}</a>
  ) : r.trigger.type === "parent" && r.parent ? (
    <>
      step <code>{r.parent.step_id}</code> of run <code>{r.parent.run_id}</code>
    </>
  ) : (
    "manual"
  );

export const triggerText = (wf: Workflow) => (wf.trigger.type === "event" ? `on ${wf.trigger.event_type}` : "manual");

/** The key that did something, by name (and id, to tell keys of one name apart). */
export const actorText = (a: Actor) => `${a.key_name ?? "a key"} (${a.key_id})`;

/** What the server takes as an approval's comment, at most. */
export const COMMENT_MAX = 1000;
