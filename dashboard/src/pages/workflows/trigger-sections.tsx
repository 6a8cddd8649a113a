import type { Workflow } from "../../api";
import { HookSection } from "./hook-section";
import { ScheduleSection } from "./schedule-section";

/** What a workflow's trigger has to show beside the workflow: its schedule, or its hook. */
export function TriggerSections({ workflow }: { workflow: Workflow }) {
  if (workflow.trigger.type === "schedule") return <ScheduleSection workflowId={workflow.id} />;
  if (workflow.hook) return <HookSection workflowId={workflow.id} />;
  return null;
}
