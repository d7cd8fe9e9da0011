import { sha256Hex } from "../core/digest.ts";
import { PostgresSchemaError } from "./errors.ts";

/** Loom's table names, qualified by the schema when one is configured. */
export interface Tables {
  readonly meta: string;
  /**
   * One row per run: its integer key, id, version (last seq), entry count, last type and time, and
   * until when a process follows it (`watched_until`, appendNotify.ts).
   */
  readonly runs: string;
  readonly entryTypes: string;
  /** The entries, laid out as `sqliteRows.ts` describes (integer run and type keys, frame columns). */
  readonly entries: string;
  readonly blobs: string;
  /** Which runs refer to which blob (a `"sha256:…"` ref in an entry's text): what `pruneRuns` keeps. */
  readonly blobRefs: string;
  readonly archive: string;
  /**
   * The workers' queue: one row per submitted run, with its lease (owner, expiry) and whether
   * something woke it (`woken`: claimed even though its journal says it waits; leases.ts).
   */
  readonly leases: string;
  /** Run ownership: one row per run ever owned, its fencing token and current owner (owners.ts). */
  readonly owners: string;
  /** Cancel requests (`requestCancel`): one row per run someone asked to cancel, with the reason. */
  readonly cancels: string;
  /** Each run's latest snapshot of its folded state (`writeSnapshot`): run id, seq, digest, body. */
  readonly snapshots: string;
  /** Every entry as text (`select * from loom_journal`), for reading the tables with psql. */
  readonly journal: string;
  /** One row per schedule: the last tick it handled (fired or skipped), moved under a row lock (scheduler.ts). */
  readonly schedules: string;
  /** One row per tenant that was ever claimed for: when it was last served (fair claiming, leases.ts). */
  readonly tenants: string;
  /** One token bucket per shared rate limit (`sharedRateLimit`): requests and tokens left, and when. */
  readonly rateLimits: string;
  /**
   * The NOTIFY channel that announces due runs: one per schema (a hash of its name, as channel
   * names are identifiers of at most 63 characters), so tenants in other schemas are not woken.
   */
  readonly channel: string;
  /**
   * The NOTIFY channel an append announces its run id on (`followRun` from other processes): a
   * run's first append, and every append while the run's `watched_until` has not passed.
   */
  readonly appended: string;
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** Table names in `schema` (validated, then quoted: identifiers cannot be query parameters). */
export function tablesIn(schema: string | undefined): Tables {
  if (schema !== undefined && !IDENTIFIER.test(schema)) {
    throw new PostgresSchemaError(
      `postgres schema name ${JSON.stringify(schema)} is not allowed: use letters, digits and _ (not first), at most 63 characters`,
    );
  }
  const q = (name: string) => (schema === undefined ? name : `"${schema}".${name}`);
  return {
    meta: q("loom_meta"),
    runs: q("loom_runs"),
    entryTypes: q("loom_entry_types"),
    entries: q("loom_entries"),
    blobs: q("loom_blobs"),
    blobRefs: q("loom_blob_refs"),
    archive: q("loom_archive"),
    leases: q("loom_leases"),
    owners: q("loom_owners"),
    cancels: q("loom_cancels"),
    snapshots: q("loom_snapshots"),
    journal: q("loom_journal"),
    schedules: q("loom_schedules"),
    tenants: q("loom_tenants"),
    rateLimits: q("loom_rate_limits"),
    channel: `loom_due_${sha256Hex(schema ?? "").slice(0, 16)}`,
    appended: `loom_app_${sha256Hex(schema ?? "").slice(0, 16)}`,
  };
}
