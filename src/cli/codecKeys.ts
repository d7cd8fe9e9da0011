import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { isPayloadCodecError, type KeyProvider, type PayloadCodec, payloadCodec, staticKeys } from "../journal.ts";
import { CliError, type CliIo } from "./io.ts";

/**
 * The `loom` command on a journal written through the payload codec (src/events/codec/codec.ts).
 * Every command that opens a journal reads it through a codec: compression is told by each
 * entry's envelope (`codec: ["gzip", …]`), so a compressed journal needs nothing; an encrypted
 * one needs its keys, from `--codec-keys <file>` or `LOOM_CODEC_KEYS`: a JSON object of key id →
 * key (32 bytes, base64 or 64 hex digits), e.g. `{ "k1": "base64…", "k2": "base64…" }`.
 *
 * What a command writes that holds a payload (a fork's copy of the run, an archived frame) is
 * encrypted under the LAST key of the file (list keys oldest first, as they rotate) and
 * gzip-compressed; without a key file it is written uncompressed and in the clear.
 */

/** The environment variable naming the key file (when no `--codec-keys` is given). */
export const CODEC_KEYS_ENV = "LOOM_CODEC_KEYS";

/** The options of a command that reads a journal through the codec. */
export interface CodecKeyOptions {
  readonly codecKeys?: string;
}

/** The key file named by `--codec-keys`, else by `LOOM_CODEC_KEYS`; undefined when neither is. */
function keyFile(io: CliIo, options: CodecKeyOptions): { path: string; via: string } | undefined {
  if (options.codecKeys !== undefined) return { path: resolve(io.cwd, options.codecKeys), via: "--codec-keys" };
  const env = io.env?.[CODEC_KEYS_ENV];
  if (env === undefined || env.trim() === "") return undefined;
  return { path: resolve(io.cwd, env), via: CODEC_KEYS_ENV };
}

/** A key as the file spells it: base64, or 64 hex digits. */
function keyBytes(text: string): Buffer {
  return /^[0-9a-fA-F]{64}$/.test(text) ? Buffer.from(text, "hex") : Buffer.from(text, "base64");
}

/** The keys of `path` (read and checked now, so a bad file is told before the journal is opened). */
export function loadCodecKeys(path: string, via = "--codec-keys"): KeyProvider {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (cause) {
    throw new CliError(
      "codecKeysUnreadable",
      `cannot read the key file ${path} (${via}): ${(cause as Error).message}`,
      { cause },
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (cause) {
    throw new CliError(
      "codecKeysInvalid",
      `the key file ${path} (${via}) is not JSON: it holds an object of key id → key (base64 of 32 bytes), e.g. {"k1": "…"}`,
      { cause },
    );
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed) || Object.keys(parsed).length === 0) {
    throw new CliError(
      "codecKeysInvalid",
      `the key file ${path} (${via}) must hold an object of key id → key (base64 of 32 bytes), e.g. {"k1": "…"}`,
    );
  }
  const keys: Record<string, Uint8Array> = {};
  for (const [id, value] of Object.entries(parsed)) {
    const bytes = typeof value === "string" ? keyBytes(value.trim()) : undefined;
    if (bytes === undefined || bytes.byteLength !== 32) {
      throw new CliError(
        "codecKeysInvalid",
        `the key file ${path} (${via}): key ${JSON.stringify(id)} is not 32 bytes in base64 or hex (AES-256-GCM keys are 32 bytes)`,
      );
    }
    keys[id] = bytes;
  }
  return staticKeys({ current: Object.keys(keys).at(-1) as string, keys });
}

/**
 * The codec a command reads (and writes) the journal through: decoding whatever each envelope
 * says, with the keys of the key file when one is named.
 *
 * @example
 * const codec = cliCodec(io, { codecKeys: "./keys.json" });
 */
export function cliCodec(io: CliIo, options: CodecKeyOptions): PayloadCodec {
  const file = keyFile(io, options);
  if (file === undefined) return payloadCodec({});
  return payloadCodec({ compress: "gzip", encrypt: { keys: loadCodecKeys(file.path, file.via) } });
}

/**
 * A `PayloadCodecError` told in the command's terms: which key id is needed and how to give it.
 * Any other error is returned as it is.
 */
export function codecErrorForCli(e: unknown): unknown {
  if (!isPayloadCodecError(e)) return e;
  const key = e.keyId === undefined ? "its key" : `key ${JSON.stringify(e.keyId)}`;
  const hint =
    e.code === "keyMissing" || e.code === "codecRequired"
      ? `; pass --codec-keys <file> (or set ${CODEC_KEYS_ENV}) naming a JSON file that holds ${key}`
      : e.code === "keyRejected" || e.code === "keyInvalid"
        ? `; the key file's ${key} is not the one the journal was written with`
        : "";
  return new CliError(e.code, `${e.message}${hint}`, { cause: e });
}
