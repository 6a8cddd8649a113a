import type { Context, ServiceSchema } from "moleculer";
import { tenantOf, type CallMeta } from "../../shared/api/context";
import { ApiError, invalidParam, isDuplicate } from "../../shared/errors";
import { newId, nowIso } from "../../shared/ids";
import { newestFirst, type ListResult } from "../../shared/api/pagination";
import type { PlatformSettings } from "../../shared/runtime/platform";
import { checkCountQuota, QUOTAS } from "../../shared/records/quotas";
import { ALL_TENANTS, type Tenant } from "../../shared/storage/types";
import type { Secret } from "../../shared/api/wire";
import { secretsChanged } from "../../shared/api/hooks";
import { open, seal, SECRET_NAME, SecretUnavailable, secretView, type SecretDoc } from "./secrets.logic";
import {
  createSecretParams,
  listSecretsParams,
  secretNameParams,
  type CreateSecretParams,
  type ListSecretsParams,
  type SecretNameParams,
} from "./secrets.params";
import type { WorkflowsStoreVars } from "./workflows.store";

/** Secrets re-encrypted per read at start (a rotation of SECRETS_KEYS). */
const RESEAL_BATCH = 100;

export interface SecretsMethods {
  /**
   * The values of the secrets `names` of one environment, decrypted, for a step about to send them;
   * SecretUnavailable when one is missing or cannot be opened. A value sealed under an older key is
   * sealed again under the current one (the rotation of SECRETS_KEYS, README).
   */
  secretValues(tenant: Required<Tenant>, names: readonly string[]): Promise<Record<string, string>>;
  /** Seals `doc`'s value again under the current key, unless it changed meanwhile; false when it cannot be opened. */
  reseal(doc: SecretDoc, value?: string): Promise<boolean>;
}
type Ctx<P> = Context<P, CallMeta>;

const KEYS_UNSET = "Secrets are off: SECRETS_KEYS is not set on the workflows nodes (see docs/operations/README.md)";

const noSecret = (name: string): ApiError => new ApiError("resource_not_found", `No such secret: '${name}'`, { param: "name" });

function checkName(name: string): void {
  if (!SECRET_NAME.test(name))
    throw invalidParam(
      "name",
      "name must start with a letter and hold only letters, digits and _ (at most 64), as in {{secrets.STRIPE_KEY}}",
    );
}

/**
 * Secrets: the workflows service owns them because its engine is their only reader. The values are
 * decrypted on the node that sends the step's request, so a value never crosses the bus and only the
 * workflows nodes hold SECRETS_KEYS. A mixin of the workflows service, its actions `workflows.*Secret*`.
 */
export const SecretsMixin: Partial<ServiceSchema<PlatformSettings, SecretsMethods, WorkflowsStoreVars>> = {
  actions: {
    /** POST /secrets — secrets:write; creates the secret, or replaces the value of one of that name. Answers its metadata only. */
    createSecret: {
      params: createSecretParams,
      async handler(ctx: Ctx<CreateSecretParams>): Promise<Secret> {
        const tenant = tenantOf(ctx);
        const { name, value } = ctx.params;
        checkName(name);
        const keys = this.settings.config.secretsKeys;
        if (keys.length === 0) throw new ApiError("service_unavailable", KEYS_UNSET);
        const sealed = seal(keys, { ...tenant, name }, value);
        const at = nowIso();
        const existing = await this.secrets.findOne(tenant, { name });
        if (existing) {
          const updated = await this.secrets.update(tenant, { id: existing.id }, { $set: { ...sealed, updated_at: at } });
          if (!updated) throw noSecret(name);
          secretsChanged(this.broker, tenant);
          return secretView(updated);
        }
        await checkCountQuota(
          this.secrets,
          tenant,
          {},
          "secrets_per_environment",
          QUOTAS.secrets_per_environment,
          "secrets per environment",
        );
        const doc: SecretDoc = { id: newId("sec"), ...tenant, name, ...sealed, created_at: at, updated_at: at };
        try {
          await this.secrets.insert(doc);
        } catch (err) {
          if (isDuplicate(err)) throw new ApiError("invalid_state", `The secret '${name}' was created meanwhile; retry`, { param: "name" });
          throw err;
        }
        secretsChanged(this.broker, tenant);
        return secretView(doc);
      },
    },

    /** GET /secrets — secrets:read; names and metadata, newest first. */
    listSecrets: {
      params: listSecretsParams,
      handler(ctx: Ctx<ListSecretsParams>): Promise<ListResult<Secret>> {
        return newestFirst(this.secrets, tenantOf(ctx), {}, ctx.params, secretView);
      },
    },

    /** GET /secrets/{name} — secrets:read; the metadata. */
    getSecret: {
      params: secretNameParams,
      async handler(ctx: Ctx<SecretNameParams>): Promise<Secret> {
        const doc = await this.secrets.findOne(tenantOf(ctx), { name: ctx.params.name });
        if (!doc) throw noSecret(ctx.params.name);
        return secretView(doc);
      },
    },

    /** DELETE /secrets/{name} — secrets:write; steps that use it fail from then on. */
    removeSecret: {
      params: secretNameParams,
      async handler(ctx: Ctx<SecretNameParams>): Promise<Secret> {
        const removed = await this.secrets.delete(tenantOf(ctx), { name: ctx.params.name });
        if (!removed) throw noSecret(ctx.params.name);
        secretsChanged(this.broker, removed);
        return secretView(removed);
      },
    },
  },

  methods: {
    async secretValues(tenant, names) {
      if (names.length === 0) return {};
      const keys = this.settings.config.secretsKeys;
      if (keys.length === 0)
        throw new SecretUnavailable(`the step uses {{secrets.${names[0]}}}, but SECRETS_KEYS is not set on this workflows node`);
      const docs = await this.secrets.find(tenant, { name: { $in: [...names] } }, { limit: names.length });
      const values: Record<string, string> = {};
      for (const name of names) {
        const doc = docs.find((d) => d.name === name);
        if (!doc)
          throw new SecretUnavailable(
            `the step uses {{secrets.${name}}}, but no secret '${name}' exists in the ${tenant.environment} environment (create it with POST /v1/secrets)`,
          );
        values[name] = open(keys, doc);
        if (doc.key_id !== keys[0].id) await this.reseal(doc, values[name]);
      }
      return values;
    },

    async reseal(doc, value) {
      const keys = this.settings.config.secretsKeys;
      try {
        const resealed = seal(keys, doc, value ?? open(keys, doc));
        // Under the nonce it was read with: a racing writer's newer value is left as it is.
        await this.secrets.update(
          { org_id: doc.org_id, environment: doc.environment },
          { id: doc.id, key_id: doc.key_id, iv: doc.iv },
          { $set: { ...resealed } },
        );
        return true;
      } catch (err) {
        this.logger.warn(
          `secret '${doc.name}' (${doc.org_id}/${doc.environment}) not re-encrypted under key '${keys[0].id}'`,
          (err as Error).message,
        );
        return false;
      }
    },
  },

  /**
   * A rotation of SECRETS_KEYS (README): a node that starts with a new key first seals every secret
   * still under an older key again, in batches in id order, so the old key can be dropped once
   * GET /secrets shows none left under it. One that cannot be opened is left, and logged.
   */
  async started() {
    const keys = this.settings.config.secretsKeys;
    if (keys.length < 2) return;
    let after = "";
    for (;;) {
      const batch = await this.secrets.find(
        ALL_TENANTS,
        { key_id: { $ne: keys[0].id }, id: { $gt: after } },
        { sort: { id: 1 }, limit: RESEAL_BATCH },
      );
      for (const doc of batch) await this.reseal(doc);
      if (batch.length < RESEAL_BATCH) return;
      after = batch[batch.length - 1].id;
    }
  },
};
