import type { ServiceBroker } from "moleculer";
import { ApiError } from "../errors";
import type { StoreMessage, StoreOp } from "./apply";
import type { Collection, Doc, Filter, FindOptions, IndexSpec, Page, Scope, Store, Update } from "./types";

/** Carries one message to the store's owner and resolves with its answer. */
export type Send = (message: StoreMessage) => Promise<unknown>;

class RemoteCollection<T extends Doc> implements Collection<T> {
  private indexesSent = false;

  constructor(
    readonly name: string,
    private readonly indexes: IndexSpec[],
    private readonly send: Send,
  ) {}

  private async call<R>(op: StoreOp, ...args: unknown[]): Promise<R> {
    const message: StoreMessage = { collection: this.name, op, args };
    // The owner persists index definitions, so each client declares them once, until one call succeeds.
    if (!this.indexesSent && this.indexes.length > 0) message.indexes = this.indexes;
    const result = (await this.send(message)) as R;
    this.indexesSent = true;
    return result;
  }

  insert(doc: T) {
    return this.call<T>("insert", doc);
  }
  get(scope: Scope, id: string) {
    return this.call<T | null>("get", scope, id);
  }
  findOne(scope: Scope, filter: Filter, options: Pick<FindOptions, "sort"> = {}) {
    return this.call<T | null>("findOne", scope, filter, options);
  }
  find(scope: Scope, filter: Filter, options: FindOptions = {}) {
    return this.call<T[]>("find", scope, filter, options);
  }
  count(scope: Scope, filter: Filter) {
    return this.call<number>("count", scope, filter);
  }
  page(scope: Scope, filter: Filter, options: FindOptions) {
    return this.call<Page<T>>("page", scope, filter, options);
  }
  update(scope: Scope, filter: Filter, update: Update, options: Pick<FindOptions, "sort"> = {}) {
    return this.call<T | null>("update", scope, filter, update, options);
  }
  updateMany(scope: Scope, filter: Filter, update: Update) {
    return this.call<number>("updateMany", scope, filter, update);
  }
  delete(scope: Scope, filter: Filter) {
    return this.call<T | null>("delete", scope, filter);
  }
  deleteMany(scope: Scope, filter: Filter) {
    return this.call<number>("deleteMany", scope, filter);
  }
}

/**
 * A store whose every operation runs in the process owning the embedded files; `send` carries the
 * message there. Atomicity (compare-and-set) is the owner's: it alone applies operations.
 */
export class RemoteStore implements Store {
  private readonly collections = new Map<string, RemoteCollection<any>>();

  constructor(
    private readonly send: Send,
    private readonly onClose: () => Promise<void> = async () => undefined,
  ) {}

  collection<T extends Doc>(name: string, indexes: IndexSpec[] = []): Collection<T> {
    let col = this.collections.get(name) as RemoteCollection<T> | undefined;
    if (!col) {
      col = new RemoteCollection<T>(name, indexes, this.send);
      this.collections.set(name, col);
    }
    return col;
  }

  close(): Promise<void> {
    return this.onClose();
  }
}

/**
 * Sends through the broker to the `store` service, once it is known to the cluster. A store node
 * missing for `waitMs` answers 503, and the next operation waits for it again.
 */
export function sendOverBroker(broker: ServiceBroker, waitMs: number): Send {
  let ready: Promise<void> | undefined;
  return async (message) => {
    ready ??= broker.waitForServices("store", waitMs).then(
      () => undefined,
      () => {
        ready = undefined;
        throw new ApiError("service_unavailable", "The store node is unavailable", { retry_after: 1 });
      },
    );
    await ready;
    // Never retried: an insert or an $inc whose answer was lost may have been applied already.
    return broker.call("store.op", message, { retries: 0 });
  };
}
