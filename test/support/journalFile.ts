import { openSqliteJournal } from "../../src/index.ts";

/** Opens the SQLite journal at `file` for `work` and closes it after, as one short-lived process would. */
export async function inProcess<T>(
  file: string,
  work: (journal: ReturnType<typeof openSqliteJournal>) => Promise<T>,
): Promise<T> {
  const journal = openSqliteJournal(file);
  try {
    return await work(journal);
  } finally {
    await journal.close();
  }
}
