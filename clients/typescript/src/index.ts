/**
 * The Breakwater API from TypeScript: the types of every path, operation and schema of
 * docs/openapi.json (generated into ./schema.ts by openapi-typescript; do not edit that file,
 * run clients/generate.sh), and a typed fetch client (openapi-fetch) that sends a key.
 *
 * Each call answers `{ data, error, response }`: `data` typed by the operation's 2xx body,
 * `error` by its 4xx/5xx body (a `Problem`: `{type, title, status, detail, code, field?}`),
 * `response` the raw `Response`. A call never throws for an HTTP status, only for a network
 * failure.
 */
import createClient, { type Client, type ClientOptions } from "openapi-fetch";
import type { components, operations, paths } from "./schema.js";

export type { components, operations, paths };

/** Every schema of the document by name: `Schemas["Channel"]`, `Schemas["Problem"]`, … */
export type Schemas = components["schemas"];

/** A client of the whole API, typed by path and method. */
export type BreakwaterClient = Client<paths>;

/** Options of {@link createBreakwaterClient}: openapi-fetch's, with the base URL required. */
export interface BreakwaterClientOptions extends Omit<ClientOptions, "baseUrl"> {
  /** The service's root, e.g. `http://127.0.0.1:8080` (paths start with `/api/v1/…`). */
  baseUrl: string;
  /**
   * The bearer key sent with every request: a tenant's API key (`bw_…`) for the tenant's
   * routes, the operator key for `/api/v1/tenants` and `/api/v1/admin/…`. Absent: no
   * `Authorization` header (for `/healthz`, `/readyz`).
   */
  key?: string;
}

/**
 * A typed client of the API at `baseUrl`, sending `Authorization: Bearer <key>`.
 *
 * ```ts
 * const bw = createBreakwaterClient({ baseUrl: "http://127.0.0.1:8080", key: "bw_…" });
 * const { data, error } = await bw.POST("/api/v1/channels", { body: { url: "https://example.com/hooks" } });
 * ```
 */
export function createBreakwaterClient(options: BreakwaterClientOptions): BreakwaterClient {
  const { key, headers, ...rest } = options;
  const auth = key === undefined ? {} : { Authorization: `Bearer ${key}` };
  return createClient<paths>({ ...rest, headers: { ...auth, ...(headers as object | undefined) } });
}
