import type { StoreMessage } from "./apply";
import type { Collection, Doc, Filter, FindOptions, IndexSpec, Page, Scope, Store, Update } from "./types";

export type Send = (msg: StoreMessage) => Promise<unknown>;

class RemoteCollection<T extends Doc> implements Collection<T> {
  private indexesSent = false;

  constructor(
    readonly name: string,
    private readonly indexes: IndexSpec[],
    private readonly send: Send,
  ) {}

  private async call<R>(op: StoreMessage["op"], ...a: unknown[]): Promise<R> {
    const msg: StoreMessage = { c: this.name, op, a };
    if (!this.indexesSent && this.indexes.length > 0) msg.i = this.indexes;
    const result = (await this.send(msg)) as R;
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
 * A store whose every operation runs on the node owning the embedded files; `send` carries the
 * message there (the broker in a cluster, a unix socket for the CLI). Atomicity is the owner's.
 */
export class RemoteStore implements Store {
  private readonly collections = new Map<string, RemoteCollection<any>>();

  constructor(
    private readonly send: Send,
    private readonly onClose: () => Promise<void> = async () => undefined,
  ) {}

  collection<T extends Doc>(name: string, indexes: IndexSpec[] = []): Collection<T> {
    let col = this.collections.get(name);
    if (!col) {
      col = new RemoteCollection<T>(name, indexes, this.send);
      this.collections.set(name, col);
    }
    return col as Collection<T>;
  }

  close(): Promise<void> {
    return this.onClose();
  }
}
