import type { AuditEntry } from "../api/wire";

/**
 * An audit log entry as the gateway hands it to the orgs service (`orgs.recordAudit`), which alone
 * stores them (`audit_log`), and as stored: the entry the API shows, with its organization.
 */
export interface AuditRecord extends Omit<AuditEntry, "object"> {
  org_id: string;
}
