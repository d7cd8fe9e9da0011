import type { PayloadCodec } from "../journal.ts";

/**
 * Where a command's journal is: a SQLite file, or a PostgreSQL database (and schema). Commands
 * take it from their options and the environment ({@link journalSource}), open it with
 * `withJournal` (db.ts) and work on the journal alone, whichever it is.
 */
export type JournalSource = (
  | { readonly kind: "sqlite"; readonly path: string; readonly label: string }
  | {
      readonly kind: "postgres";
      readonly url: string;
      readonly schema?: string;
      /** What named the database, for messages: `--pg` or `LOOM_PG_URL`. */
      readonly via: "--pg" | "LOOM_PG_URL";
      readonly label: string;
    }
) & {
  /** The payload codec the journal is read through (codecKeys.ts): envelopes decoded, keys from `--codec-keys`. */
  readonly codec?: PayloadCodec;
};

/** The environment variables a command reads: the PostgreSQL URL and schema. */
export const PG_ENV = { url: "LOOM_PG_URL", schema: "LOOM_PG_SCHEMA" } as const;
