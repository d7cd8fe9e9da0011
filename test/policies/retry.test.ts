import { APICallError } from "@ai-sdk/provider";
import { describe, expect, it } from "vitest";
import {
  type AttemptError,
  attemptError,
  DEFAULT_MODEL_RETRY,
  DEFAULT_TOOL_RETRY,
  decideRetry,
  type RetryPolicy,
  validateRetryPolicy,
} from "../../src/policies/retry.ts";

const NOW = Date.UTC(2026, 11, 3, 12, 0, 0);

const apiError = (statusCode: number, responseHeaders?: Record<string, string>, isRetryable?: boolean) =>
  new APICallError({
    message: `HTTP ${statusCode}`,
    url: "http://127.0.0.1/v1/chat",
    requestBodyValues: {},
    statusCode,
    ...(responseHeaders ? { responseHeaders } : {}),
    ...(isRetryable === undefined ? {} : { isRetryable }),
  });

const networkError = (code: string) => Object.assign(new TypeError("fetch failed"), { cause: { code } });

describe("attemptError: what an error says about itself", () => {
  it.each([
    [408, true],
    [409, true],
    [429, true],
    [500, true],
    [503, true],
    [400, false],
    [401, false],
    [403, false],
    [404, false],
    [422, false],
  ])("an AI SDK APICallError with status %i is retryable: %s", (status, retryable) => {
    const described = attemptError(apiError(status), NOW);
    expect(described).toMatchObject({ name: "AI_APICallError", status, retryable, message: `HTTP ${status}` });
  });

  it("never retries 400, 401 or 403, even when the error claims it may", () => {
    for (const status of [400, 401, 403]) expect(attemptError(apiError(status, {}, true), NOW).retryable).toBe(false);
  });

  it("trusts isRetryable over the status otherwise", () => {
    expect(attemptError(apiError(500, {}, false), NOW).retryable).toBe(false);
    expect(attemptError(apiError(404, {}, true), NOW).retryable).toBe(true);
  });

  it("reads status from status and response.status (fetch-like errors)", () => {
    expect(attemptError(Object.assign(new Error("x"), { status: 502 }), NOW)).toMatchObject({
      status: 502,
      retryable: true,
    });
    expect(attemptError(Object.assign(new Error("x"), { response: { status: 401 } }), NOW)).toMatchObject({
      status: 401,
      retryable: false,
    });
  });

  it("retries network failures: fetch failed with a socket code, ECONNRESET on the error itself", () => {
    expect(attemptError(networkError("ECONNRESET"), NOW)).toMatchObject({ name: "TypeError", retryable: true });
    expect(attemptError(Object.assign(new Error("socket hang up"), { code: "ECONNRESET" }), NOW).retryable).toBe(true);
    expect(attemptError(new Error("boom"), NOW).retryable).toBe(false);
    expect(attemptError(new TypeError("x is not a function"), NOW).retryable).toBe(false);
  });

  it("honours retry-after-ms, retry-after in seconds, and retry-after as an HTTP date", () => {
    expect(attemptError(apiError(429, { "retry-after-ms": "1500" }), NOW).retryAfterMs).toBe(1500);
    expect(attemptError(apiError(429, { "Retry-After": "1" }), NOW).retryAfterMs).toBe(1000);
    const date = new Date(NOW + 7_000).toUTCString();
    expect(attemptError(apiError(503, { "retry-after": date }), NOW).retryAfterMs).toBe(7000);
    expect(attemptError(apiError(503, { "retry-after": "soon" }), NOW).retryAfterMs).toBeUndefined();
    const headers = new Headers({ "retry-after": "2" });
    expect(attemptError(Object.assign(new Error("x"), { status: 429, headers }), NOW).retryAfterMs).toBe(2000);
  });

  it("describes anything thrown: a string, null, an object without a name; long messages are cut", () => {
    expect(attemptError("nope", NOW)).toEqual({ name: "Error", message: "nope", retryable: false });
    expect(attemptError(null, NOW)).toEqual({ name: "Error", message: "null", retryable: false });
    expect(attemptError({ message: "m" }, NOW)).toEqual({ name: "Error", message: "m", retryable: false });
    expect(attemptError(new Error("x".repeat(5000)), NOW).message.length).toBe(2000);
  });

  it("gives a JSON form the journal can hold", () => {
    const described = attemptError(apiError(429, { "retry-after": "1" }), NOW);
    expect(JSON.parse(JSON.stringify(described))).toEqual(described);
  });
});

describe("decideRetry: given a failed attempt, when deciding, then retry at a time or give up", () => {
  const retryable: AttemptError = { name: "E", message: "m", status: 503, retryable: true };
  const fixed: RetryPolicy = { maxAttempts: 4, initialDelayMs: 100, maxDelayMs: 350, factor: 2, jitter: 0 };

  it.each([
    [1, 100],
    [2, 200],
    [3, 350],
  ])("after attempt %i waits %i ms (exponential, capped)", (attempt, delayMs) => {
    expect(decideRetry(fixed, { attempt, error: retryable, now: NOW, random: 0.5 })).toEqual({
      retry: true,
      delayMs,
      retryAt: NOW + delayMs,
    });
  });

  it("gives up when the attempts are used up", () => {
    expect(decideRetry(fixed, { attempt: 4, error: retryable, now: NOW, random: 0 })).toEqual({
      retry: false,
      why: "attempts-exhausted",
    });
  });

  it("gives up at once on an error that is not retryable", () => {
    const denied = { ...retryable, status: 401, retryable: false };
    expect(decideRetry(fixed, { attempt: 1, error: denied, now: NOW, random: 0 })).toEqual({
      retry: false,
      why: "not-retryable",
    });
  });

  it("lets the policy's predicate decide instead of the error", () => {
    const onlyTimeouts: RetryPolicy = { ...fixed, retryable: (e) => e.name === "TimeoutError" };
    expect(decideRetry(onlyTimeouts, { attempt: 1, error: retryable, now: NOW, random: 0 }).retry).toBe(false);
    const timeout = { name: "TimeoutError", message: "t", retryable: false };
    expect(decideRetry(onlyTimeouts, { attempt: 1, error: timeout, now: NOW, random: 0 }).retry).toBe(true);
  });

  it("draws jitter from the caller's random: the delay stays within [1 − jitter, 1] of nominal", () => {
    const jittery = { ...fixed, jitter: 0.5 };
    const at = (random: number) => decideRetry(jittery, { attempt: 2, error: retryable, now: NOW, random });
    expect(at(0)).toMatchObject({ delayMs: 200 });
    expect(at(0.999)).toMatchObject({ delayMs: 101 });
    expect(at(0.5)).toMatchObject({ delayMs: 150 });
  });

  it("never waits less than the server's Retry-After, even past maxDelayMs", () => {
    const asked = { ...retryable, status: 429, retryAfterMs: 1000 };
    expect(decideRetry(fixed, { attempt: 1, error: asked, now: NOW, random: 0 })).toEqual({
      retry: true,
      delayMs: 1000,
      retryAt: NOW + 1000,
    });
  });

  it("defaults: models try three times, tools once", () => {
    expect(DEFAULT_MODEL_RETRY.maxAttempts).toBe(3);
    expect(decideRetry(DEFAULT_TOOL_RETRY, { attempt: 1, error: retryable, now: NOW, random: 0 }).retry).toBe(false);
  });
});

describe("validateRetryPolicy", () => {
  const fail = (m: string) => new Error(m);

  it("completes a partial policy with the defaults", () => {
    expect(validateRetryPolicy({ maxAttempts: 5 }, DEFAULT_MODEL_RETRY, "retry.model", fail)).toEqual({
      ...DEFAULT_MODEL_RETRY,
      maxAttempts: 5,
    });
    expect(validateRetryPolicy(undefined, DEFAULT_MODEL_RETRY, "retry.model", fail)).toBe(DEFAULT_MODEL_RETRY);
  });

  it.each([
    [{ maxAttempts: 0 }, "retry.model.maxAttempts must be a whole number ≥ 1 (got 0)"],
    [{ maxAttempts: 1.5 }, "retry.model.maxAttempts"],
    [{ initialDelayMs: -1 }, "retry.model.initialDelayMs"],
    [{ initialDelayMs: 10, maxDelayMs: 5 }, "retry.model.maxDelayMs must be ≥ initialDelayMs"],
    [{ factor: 0.5 }, "retry.model.factor"],
    [{ jitter: 2 }, "retry.model.jitter must be a number from 0 to 1"],
    [{ retryable: "yes" }, "retry.model.retryable must be a function"],
  ])("refuses %j", (given, message) => {
    expect(() => validateRetryPolicy(given as Partial<RetryPolicy>, DEFAULT_MODEL_RETRY, "retry.model", fail)).toThrow(
      message,
    );
  });
});
