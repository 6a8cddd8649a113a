import { ApiError } from "../../shared/errors";
import { newId, timeOfId } from "../../shared/ids";
import type { AuditRecord } from "../../shared/records/audit";
import { auditedResource } from "./audit";
import type { GatewayPart } from "./gateway.types";

/**
 * What the gateway records about requests for others: the audit log's entries (orgs service),
 * usage batches for analytics (meter.ts), and each key's time of last use (keys service).
 */
export const RecordsMixin: GatewayPart = {
  methods: {
    async flushMeter() {
      if (this.metering) return;
      this.metering = true;
      try {
        for (const batch of this.meter.batches()) {
          await this.broker.call("analytics.ingest", batch);
          this.meter.acknowledged(batch.batch_id);
        }
      } catch (err) {
        // Kept, with its id, for the next flush; the analytics service stores a batch once.
        if (this.meter.backlog > 10)
          this.logger.warn(`usage: ${this.meter.backlog} batches wait for the analytics service`, (err as Error).message);
      } finally {
        this.metering = false;
      }
    },

    async recordAudit(x, caller, spec, params, data, status) {
      const id = newId("aud");
      const entry: AuditRecord = {
        id,
        org_id: caller.org_id,
        environment: caller.environment,
        actor: { key_id: caller.key_id, key_name: caller.key_name ?? null },
        action: spec.action,
        method: x.method,
        route: x.route ?? "",
        resource: auditedResource(spec, params, data),
        request_id: x.requestId,
        client_address: x.address,
        status,
        // The id's own time: a time range of the list (a range of ids) then agrees with created_at to the millisecond.
        created_at: new Date(timeOfId(id)).toISOString(),
      };
      try {
        await this.auditLog.record(entry);
      } catch (err) {
        // Never silent: the entry is in this line (an operator can store it again), and the client
        // is not told the change succeeded without its record (its Idempotency-Key replays the success).
        this.logger.error({ request_id: x.requestId, audit_entry: entry, err }, "Audit log entry not stored; the change was applied");
        throw new ApiError("internal_error", "The change was applied, but its audit log entry could not be stored; it has been logged");
      }
    },

    async flushUsage() {
      if (this.usage.size === 0) return;
      const uses = [...this.usage].map(([key_id, { org_id, at }]) => ({ key_id, org_id, at: new Date(at).toISOString() }));
      this.usage.clear();
      await this.broker.call("keys.touch", { uses }).catch(() => undefined);
    },
  },
};
