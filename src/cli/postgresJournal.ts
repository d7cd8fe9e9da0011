import type { OpenJournal } from "../index.ts";
import { openPostgresJournal } from "../postgres/journal.ts";
import { probeJournal } from "../postgres/probe.ts";
import { CliError } from "./io.ts";
import { type JournalSource, PG_ENV } from "./journalSourceSpec.ts";

/**
 * The `loom` command's PostgreSQL journal. Loaded only when a command is given one
 * (journalSource.ts), as it loads `pg` (through src/postgres).
 */

type PostgresSource = Extract<JournalSource, { kind: "postgres" }>;

/**
 * Opens the journal in `source`'s database and schema, once it is known to hold one: opening
 * creates Loom's tables where they are missing, and a command must not turn a mistyped schema
 * into an empty journal (as it does not create a SQLite file that is not there). Its
 * connections are named `loom cli` in `pg_stat_activity` unless the URL names them
 * (`?application_name=…`).
 */
export async function openCliPostgresJournal(source: PostgresSource): Promise<OpenJournal> {
  const probe = await probeJournal(source.url, source.schema); // refuses a schema name that is not an identifier
  if (probe.kind === "unreachable") {
    throw new CliError(
      "postgresUnreachable",
      `cannot connect to ${source.label} (${source.via}): ${probe.error.message}; check the URL and that the server is up`,
      { cause: probe.error },
    );
  }
  if (probe.kind === "missing") {
    const schemaHint =
      source.schema === undefined
        ? `pass --pg-schema <name> (or set ${PG_ENV.schema}) if Loom's tables are in a schema of their own`
        : `check --pg-schema (or ${PG_ENV.schema})`;
    throw new CliError(
      "noJournal",
      `no Loom journal in ${source.label} (no loom_meta table there): ${schemaHint}; a program's openPostgresJournal(url${source.schema === undefined ? "" : `, { schema: "${source.schema}" }`}) creates one`,
    );
  }
  return openPostgresJournal(source.url, {
    ...(source.schema === undefined ? {} : { schema: source.schema }),
    pool: { application_name: "loom cli" },
  });
}
