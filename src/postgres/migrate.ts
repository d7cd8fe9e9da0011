import type pg from "pg";
import { JournalFormatError } from "../core/errors.ts";
import { v1RowColumns } from "../events/sqlite/sqliteRows.ts";
import { SQL_BLOB_REF } from "./rows.ts";
import type { Tables } from "./tables.ts";

/**
 * Schema version 1 → 2, inside `ensureSchema`'s transaction (so a failure leaves version 1 as it
 * was): the old tables are renamed out of the way, version 2's are created, every row is laid
 * out again by the code that appends (so each entry's data text is kept byte for byte), and the
 * old tables are dropped. Archive and leases are the same in both versions.
 */

/** Version 1's entries and blobs step aside for version 2's (its `loom_streams` has no successor name). */
export async function renameV1(client: pg.PoolClient, t: Tables): Promise<void> {
  await client.query(`ALTER TABLE ${t.entries} RENAME TO loom_entries_v1`);
  await client.query(`ALTER TABLE ${t.blobs} RENAME TO loom_blobs_v1`);
  // The old primary keys' index names would collide with the new tables' ones.
  await client.query(`ALTER INDEX ${sibling(t.entries, "loom_entries_pkey")} RENAME TO loom_entries_v1_pkey`);
  await client.query(`ALTER INDEX ${sibling(t.blobs, "loom_blobs_pkey")} RENAME TO loom_blobs_v1_pkey`);
}

/** `name` in the schema of `table` (a qualified or bare table name). */
const sibling = (table: string, name: string) => table.replace(/[A-Za-z0-9_]+$/, name);

const PAGE = 1000;

export async function migrateFromV1(client: pg.PoolClient, t: Tables, label: string): Promise<void> {
  const v1 = { entries: sibling(t.entries, "loom_entries_v1"), streams: sibling(t.runs, "loom_streams") };
  const blobsV1 = sibling(t.blobs, "loom_blobs_v1");
  const where = `${label} (migrating it from schema version 1)`;
  const fix = "restore the row from a backup or remove the run, then open the database again";

  // Runs, in run id order (their keys follow it); the time of the last append comes with the entries.
  const odd = await client.query<{ run_id: string; last_type: string }>(
    `SELECT run_id, last_type FROM ${v1.streams} WHERE last_type NOT IN (SELECT type FROM ${t.entryTypes}) LIMIT 1`,
  );
  const bad = odd.rows[0];
  if (bad !== undefined) {
    throw new JournalFormatError(
      bad.run_id,
      undefined,
      "last_type",
      `unknown last type ${bad.last_type} in ${where}; ${fix}`,
    );
  }
  await client.query(
    `INSERT INTO ${t.runs} (updated_at, version, entries, last_type, run_id)
     SELECT 0, s.version, s.entries, ty.code, s.run_id FROM ${v1.streams} s JOIN ${t.entryTypes} ty ON ty.type = s.last_type
      ORDER BY s.run_id COLLATE "C"`,
  );

  await client.query(
    `DECLARE loom_v1 NO SCROLL CURSOR FOR
       SELECT r.run, e.run_id, e.seq, e.type, e.data, e.meta FROM ${v1.entries} e LEFT JOIN ${t.runs} r USING (run_id)`,
  );
  for (;;) {
    const page = await client.query<[number | null, string, number, string, string, string]>({
      text: `FETCH ${PAGE} FROM loom_v1`,
      rowMode: "array",
    });
    const cols = { at: [] as number[], run: [] as number[], seq: [] as number[], type: [] as number[] };
    const more = { v: [] as number[], frame: [] as (string | null)[], effect: [] as (string | null)[] };
    const rest = { digest: [] as (Buffer | null)[], data: [] as (string | null)[] };
    for (const [run, runId, seq, type, data, metaText] of page.rows) {
      if (run === null) {
        throw new JournalFormatError(
          runId,
          seq,
          "run_id",
          `the entry's run has no row in loom_streams in ${where}; ${fix}`,
        );
      }
      const c = v1RowColumns(runId, seq, type, data, metaText, where, fix);
      cols.at.push(c.at);
      cols.run.push(run);
      cols.seq.push(seq);
      cols.type.push(c.type);
      more.v.push(c.v);
      more.frame.push(c.frame);
      more.effect.push(c.effect);
      rest.digest.push(c.digest);
      rest.data.push(c.data);
    }
    if (page.rows.length > 0) {
      await client.query(
        `INSERT INTO ${t.entries} (at, run, seq, type, v, frame, effect, digest, data)
         SELECT * FROM unnest($1::bigint[], $2::int[], $3::int[], $4::smallint[], $5::smallint[], $6::text[], $7::text[],
                              $8::bytea[], $9::text[])`,
        [cols.at, cols.run, cols.seq, cols.type, more.v, more.frame, more.effect, rest.digest, rest.data],
      );
    }
    if (page.rows.length < PAGE) break;
  }
  await client.query("CLOSE loom_v1");

  await client.query(
    `UPDATE ${t.runs} r SET updated_at = e.at FROM ${t.entries} e WHERE e.run = r.run AND e.seq = r.version`,
  );
  // The blobs each run names, in its entries and in its archived frames.
  for (const [table, column] of [
    [v1.entries, "data"],
    [t.archive, "body"],
  ] as const) {
    await client.query(
      `INSERT INTO ${t.blobRefs} (digest, run)
       SELECT DISTINCT decode(m[1], 'hex'), r.run FROM ${table} x JOIN ${t.runs} r USING (run_id),
              regexp_matches(x.${column}, ${SQL_BLOB_REF}, 'g') AS m
       ON CONFLICT DO NOTHING`,
    );
  }
  await client.query(
    `INSERT INTO ${t.blobs} (put_at, size, digest, bytes)
     SELECT (extract(epoch FROM now()) * 1000)::bigint, size, decode(digest, 'hex'), bytes FROM ${blobsV1}`,
  );
  await client.query(`DROP TABLE ${v1.entries}, ${v1.streams}, ${blobsV1}`);
}
