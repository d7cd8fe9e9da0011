import type { Journal } from "../events/spi.ts";
import type { GenerateRequest, Model, ModelResponse, ModelStreamPart } from "../models/types.ts";
import type { PgDatabase } from "./database.ts";
import { RateLimitConfigError } from "./errors.ts";
import { databaseOf } from "./submit.ts";

/** A limit shared by every process on one database (`sharedRateLimit`). */
export interface SharedRateLimitOptions {
  /** A journal on PostgreSQL (`openPostgresJournal`): its database holds the limit's bucket. */
  readonly journal: Journal;
  /** Names the limit: every model wrapped with the same key, in any process, shares it (e.g. `"openai:gpt-4o"`). */
  readonly key: string;
  /** Model calls allowed per minute, across all processes. */
  readonly requestsPerMinute?: number;
  /**
   * Tokens (input + output, from each response's `usage`) allowed per minute, across all
   * processes. A call starts while the balance is positive; its tokens are taken when it answers
   * (its estimate, `estimateTokens`, when it starts), so a large answer makes the next calls wait.
   */
  readonly tokensPerMinute?: number;
  /**
   * How many seconds' worth of the limit may be spent at once after an idle spell (default 1):
   * over any window of `w` seconds, at most `requestsPerMinute × (w + burstSeconds) / 60` calls
   * start (and at least one call may always start).
   */
  readonly burstSeconds?: number;
  /** Tokens taken when a call starts, before its usage is known (default 0). */
  readonly estimateTokens?: (request: GenerateRequest) => number;
  /** Told each time a call waits for the limit: how long, and how many waits this call had. */
  readonly onWait?: (wait: { readonly key: string; readonly waitMs: number; readonly attempt: number }) => void;
}

/** The most a call sleeps before asking the bucket again (other processes may have left room). */
const MAX_NAP_MS = 1000;

/**
 * A model whose calls honour a rate limit shared by every worker on the database: a token bucket
 * row (`loom_rate_limits`, by `key`) refilled by the database's clock and taken from atomically
 * (one statement, the row locked), so three worker processes with the same key never together
 * exceed `requestsPerMinute` or `tokensPerMinute`. A call over the limit waits its turn (told to
 * `onWait`), it never fails for the limit; the run's abort signal ends the wait. Costs one round
 * trip before each call, and one after it when the limit counts tokens.
 *
 * @example
 * import { openPostgresJournal, sharedRateLimit, startWorker } from "loom-agent/postgres";
 * const journal = openPostgresJournal(process.env.DATABASE_URL!);
 * const model = sharedRateLimit(fromAiSdk(openai("gpt-4o")), {
 *   journal,
 *   key: "openai:gpt-4o",
 *   requestsPerMinute: 500,
 *   tokensPerMinute: 200_000,
 * });
 * const worker = startWorker({ journal, loops: { support: agentLoop$({ id: "support", model, tools }) } });
 */
export function sharedRateLimit(model: Model, options: SharedRateLimitOptions): Model {
  const { key, requestsPerMinute, tokensPerMinute, burstSeconds = 1 } = options;
  for (const [name, value] of [
    ["requestsPerMinute", requestsPerMinute],
    ["tokensPerMinute", tokensPerMinute],
    ["burstSeconds", burstSeconds],
  ] as const) {
    if (value !== undefined && !(value > 0)) {
      throw new RateLimitConfigError(key, `${name} is ${value}; give a number above 0, or leave it out`);
    }
  }
  if (requestsPerMinute === undefined && tokensPerMinute === undefined) {
    throw new RateLimitConfigError(key, "give requestsPerMinute, tokensPerMinute or both");
  }
  const db = databaseOf(options.journal, "sharedRateLimit");
  const bucket = tokenBucket(db, key, {
    requestsPerSecond: requestsPerMinute === undefined ? undefined : requestsPerMinute / 60,
    tokensPerSecond: tokensPerMinute === undefined ? undefined : tokensPerMinute / 60,
    burstSeconds,
  });
  const counted = tokensPerMinute !== undefined;

  async function admit(request: GenerateRequest): Promise<number> {
    const estimate = counted ? Math.max(0, options.estimateTokens?.(request) ?? 0) : 0;
    for (let attempt = 1; ; attempt++) {
      const waitMs = await bucket.take(estimate);
      if (waitMs === 0) return estimate;
      options.onWait?.({ key, waitMs, attempt });
      await nap(Math.min(waitMs, MAX_NAP_MS), request.signal);
    }
  }
  const settle = async (estimate: number, response: ModelResponse) => {
    if (!counted) return;
    const used = (response.usage?.inputTokens ?? 0) + (response.usage?.outputTokens ?? 0);
    if (used !== estimate) await bucket.spend(used - estimate);
  };

  const limited: Model = {
    ...model,
    async generate(request) {
      const estimate = await admit(request);
      const response = await model.generate(request);
      await settle(estimate, response);
      return response;
    },
  };
  const stream = model.stream?.bind(model);
  if (stream === undefined) return limited;
  return {
    ...limited,
    async *stream(request): AsyncIterable<ModelStreamPart> {
      const estimate = await admit(request);
      for await (const part of stream(request)) {
        if (part.type === "response") await settle(estimate, part.response);
        yield part;
      }
    },
  };
}

/** Sleeps `ms`, or until `signal` aborts (then throws its reason, as the model call would). */
function nap(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", aborted);
    };
    const aborted = () => {
      done();
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      done();
      resolve();
    }, ms);
    signal.addEventListener("abort", aborted, { once: true });
  });
}

/**
 * One bucket row: `requests` and `tokens` left as of `updated_at`. Taking refills both by the time
 * since (the database's clock, read after the row lock, so concurrent takers see each other's
 * takes), caps them at `burstSeconds` worth, and takes one request and `estimate` tokens when a
 * request is left and the token balance is positive; otherwise returns how long until it would be.
 */
function tokenBucket(
  db: PgDatabase,
  key: string,
  rates: { requestsPerSecond?: number; tokensPerSecond?: number; burstSeconds: number },
) {
  const t = db.tables;
  // A limit left out is a bucket that never runs dry.
  const rps = rates.requestsPerSecond ?? 1e9;
  const tps = rates.tokensPerSecond ?? 1e12;
  const capR = Math.max(1, rps * rates.burstSeconds);
  const capT = Math.max(1, tps * rates.burstSeconds);
  let created: Promise<unknown> | undefined;
  // One UPDATE: the row's latest version is what the SET reads (a taker that waited for the row
  // lock re-reads it), refilled up to `at`, the time read when the statement began. A taker that
  // waited past another's update refills nothing (`at` is before that update): never more than
  // the limit, at worst a little less.
  const refilledR = `least($2::float8, b.requests + $4::float8 * greatest(0, extract(epoch FROM c.at - b.updated_at))::float8)`;
  const refilledT = `least($3::float8, b.tokens + $5::float8 * greatest(0, extract(epoch FROM c.at - b.updated_at))::float8)`;
  const ok = `(${refilledR} >= 1 AND ${refilledT} > 0)`;
  const take = `
    UPDATE ${t.rateLimits} b SET
           requests = ${refilledR} - CASE WHEN ${ok} THEN 1 ELSE 0 END,
           tokens = ${refilledT} - CASE WHEN ${ok} THEN $6::float8 ELSE 0 END,
           granted = ${ok},
           updated_at = greatest(b.updated_at, c.at)
      FROM (SELECT clock_timestamp() AS at) c
     WHERE b.key = $1
    RETURNING b.granted AS ok, greatest((1 - b.requests) / $4::float8, (1 - b.tokens) / $5::float8, 0) * 1000 AS wait`;
  return {
    /** 0 when the call may start (taken), else the ms to wait before asking again. */
    async take(estimate: number): Promise<number> {
      await db.ready;
      created ??= db.pool.query(
        `INSERT INTO ${t.rateLimits} (key, requests, tokens) VALUES ($1, $2, $3) ON CONFLICT (key) DO NOTHING`,
        [key, capR, capT],
      );
      await created;
      const { rows } = await db.pool.query<{ ok: boolean; wait: number }>({
        name: `loom-rate-take-${t.rateLimits}`,
        text: take,
        values: [key, capR, capT, rps, tps, estimate],
      });
      const row = rows[0];
      if (row === undefined) {
        created = undefined; // the row was removed: make it again
        return 1;
      }
      return row.ok ? 0 : Math.max(1, Math.ceil(row.wait));
    },
    /** Takes (or gives back, when negative) `tokens` once a call's usage is known. */
    async spend(tokens: number): Promise<void> {
      await db.pool.query(`UPDATE ${t.rateLimits} SET tokens = least($3::float8, tokens - $2::float8) WHERE key = $1`, [
        key,
        tokens,
        capT,
      ]);
    },
  };
}
