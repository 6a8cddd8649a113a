import { createContext } from "preact";
import { useContext } from "preact/hooks";
import { grants, type ScopeName } from "../../../shared/api/scopes";
import type { Me } from "../api";

/** What every page needs: the key of the chosen environment and what it is allowed to do. */
export interface Account {
  key: string;
  identity: Me;
  can(scope: ScopeName): boolean;
}
export const AccountContext = createContext<Account | null>(null);

export function useAccount(): Account {
  const account = useContext(AccountContext);
  if (!account) throw new Error("useAccount outside a signed-in page");
  return account;
}

export const accountOf = (key: string, identity: Me): Account => ({
  key,
  identity,
  can: (scope) => grants(identity.api_key.scopes, scope),
});
