import { afterAll } from "vitest";
import type { OpenJournal } from "../../src/events/journal.ts";
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

/**
 * For a `describe` block: a function opening a journal with `openJournal`, each closed once the
 * block's tests are done (call it in the block's body, where `afterAll` belongs to it).
 */
export function closedAfterAll(openJournal: () => OpenJournal): () => OpenJournal {
  const opened: OpenJournal[] = [];
  afterAll(async () => {
    for (const journal of opened) await journal.close();
  });
  return () => {
    const journal = openJournal();
    opened.push(journal);
    return journal;
  };
}
