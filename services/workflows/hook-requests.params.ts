import { idParam, pageParams, type PageParams } from "../../shared/api/pagination";

/** GET /workflows/{id}/hook/requests: the workflow, and the list's paging. */
export const listHookRequestsParams = { $$strict: true, id: idParam, ...pageParams } as const;
export interface ListHookRequestsParams extends PageParams {
  id: string;
}
