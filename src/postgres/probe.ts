import pg from "pg";
import { tablesIn } from "./schema.ts";

/** What {@link probeJournal} found at a URL and schema. */
export type JournalProbe =
  | { readonly kind: "found" }
  | { readonly kind: "missing" }
  | { readonly kind: "unreachable"; readonly error: Error };

/**
 * Looks, without creating anything, whether a database (and schema) holds Loom's tables: opening
 * a journal creates them where they are missing, and a reader such as the `loom` command must not
 * turn a mistyped schema into an empty journal. Throws `PostgresSchemaError` for a schema name
 * that is not an identifier. The connection is closed before it returns.
 *
 * @example
 * const probe = await probeJournal("postgres://localhost/app", "agents");
 * if (probe.kind !== "found") console.error("no Loom journal there");
 */
export async function probeJournal(url: string, schema: string | undefined): Promise<JournalProbe> {
  const meta = tablesIn(schema).meta;
  const client = new pg.Client({ connectionString: url });
  client.on("error", () => {}); // a failure is reported by connect or the query below
  try {
    await client.connect();
  } catch (e) {
    await client.end().catch(() => {});
    return { kind: "unreachable", error: e as Error };
  }
  try {
    const [row] = (await client.query<{ found: string | null }>("SELECT to_regclass($1)::text AS found", [meta])).rows;
    return row?.found == null ? { kind: "missing" } : { kind: "found" };
  } finally {
    await client.end().catch(() => {});
  }
}
