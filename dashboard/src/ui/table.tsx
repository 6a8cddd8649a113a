import type { ComponentChildren } from "preact";
import type { PageMeta } from "../api";
import type { ApiState } from "./data";
import { Empty, Loaded } from "./states";

export interface Column<T> {
  title: string;
  /** Read by screen readers only (an actions column). */
  hideTitle?: boolean;
  class?: string;
  cell(row: T): ComponentChildren;
}

export function DataTable<T>({
  rows,
  columns,
  rowKey,
  caption,
}: {
  rows: T[];
  columns: Column<T>[];
  rowKey(row: T): string | number;
  caption?: string;
}) {
  return (
    <div class="table-wrap">
      <table>
        {caption && <caption class="visually-hidden">{caption}</caption>}
        <thead>
          <tr>
            {columns.map((c) => (
              <th scope="col" key={c.title}>
                {c.hideTitle ? <span class="visually-hidden">{c.title}</span> : c.title}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((row) => (
            <tr key={rowKey(row)}>
              {columns.map((c) => (
                <td key={c.title} class={c.class}>
                  {c.cell(row)}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** A paged list endpoint's loading, error and empty states, its table, and its pager. */
export function ListOf<T extends { id: string }>({
  state,
  what,
  empty,
  columns,
  onPage,
}: {
  state: ApiState<T[]>;
  what: string;
  empty: ComponentChildren;
  columns: Column<T>[];
  onPage(page: number): void;
}) {
  return (
    <>
      <Loaded state={state} what={what}>
        {(rows) => (rows.length === 0 ? <Empty>{empty}</Empty> : <DataTable rows={rows} columns={columns} rowKey={(r) => r.id} />)}
      </Loaded>
      <Pager meta={state.meta} onPage={onPage} />
    </>
  );
}

export function Pager({ meta, onPage }: { meta: PageMeta | null; onPage(page: number): void }) {
  if (!meta || meta.total <= meta.per_page) return null;
  const pages = Math.max(1, Math.ceil(meta.total / meta.per_page));
  return (
    <nav aria-label="Pages" class="pager">
      <button type="button" class="outline secondary small" disabled={meta.page <= 1} onClick={() => onPage(meta.page - 1)}>
        ← Newer
      </button>
      <span>
        Page {meta.page} of {pages}
        {meta.total_capped ? ` · the latest ${meta.total}` : ` · ${meta.total} in all`}
      </span>
      <button type="button" class="outline secondary small" disabled={meta.page >= pages} onClick={() => onPage(meta.page + 1)}>
        Older →
      </button>
    </nav>
  );
}
