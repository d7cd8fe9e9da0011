import type { Attributes } from "@opentelemetry/api";
import { digestOfRecorded } from "../core/digest.ts";
import { DECISION_SOURCES, decisionStepOf, parseFrameId, toolStepId } from "../events/ids.ts";
import { type RedactionRecord, redactedFields } from "../events/redaction/redact.ts";
import { keyedDigestKeyId } from "../events/redaction/redactDigest.ts";
import type { JournalEntry, ModelResponse } from "../events/types.ts";

const isKeyed = (record: RedactionRecord): boolean => keyedDigestKeyId(record.digest) !== undefined;

/**
 * The digests and sizes of each step's input and output, as span attributes, taken from the
 * entries the run appends as the journal keeps them, so a span says what the journal says.
 *
 * Where a redaction keyed its digests (`redaction({ digest: { keys } })`), a span carries the
 * journal's keyed digest of a redacted payload, or none, and never a plain sha256 or the size of
 * it: anyone who reads the spans could otherwise test guesses at what was redacted. The prompt
 * digest of a model call chains over the whole conversation, so once a payload of the run was
 * redacted under a key, model spans leave it out.
 */
export class StepDigests {
  /** Input attributes of each step, by step id, from its `frame.started`. */
  private readonly inputs = new Map<string, Attributes>();
  /** Output attributes of each step, by step id, from its `frame.completed` (or its failure's outcome). */
  private readonly outputs = new Map<string, Attributes>();
  /** Each tool step's input as the journal keeps it (in its turn's response), with whether a key redacted that response. */
  private readonly calls = new Map<string, { readonly input: unknown; readonly keyed: boolean }>();
  /** Whether a payload of the run was redacted under a key (then the prompt's chained digest is left out). */
  private keyedSeen = false;

  constructor(
    /** Whether output digests go on spans (`OtelTelemetryOptions.logDigest`). */
    private readonly outputDigests: boolean,
    /**
     * Whether tool spans carry the call's arguments and result as the journal keeps them
     * (`gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`; `OtelTelemetryOptions.toolContent`).
     */
    private readonly toolContent = false,
  ) {}

  /** Takes in the entries of one append, as the journal keeps them. */
  told(entries: readonly JournalEntry[]): void {
    for (const entry of entries) {
      const records = redactedFields(entry.data);
      if (records.some(isKeyed)) this.keyedSeen = true;
      switch (entry.type) {
        case "frame.started":
          this.started(entry.data.frameId, entry.data.inputDigest);
          break;
        case "frame.completed": {
          const data = entry.data;
          if (data.failed) break;
          const parsed = parseFrameId(data.frameId);
          const output = records.filter((r) => r.field === "output");
          if (parsed?.kind === "model") {
            const response = data.output as Partial<ModelResponse> | undefined;
            const keyed = output.some(isKeyed);
            if (Array.isArray(response?.toolCalls))
              response.toolCalls.forEach((call, index) => {
                this.calls.set(toolStepId(parsed.loopId, parsed.turn, index), { input: call?.input, keyed });
              });
            // The journal records no digest of a response: that of the response as it keeps it,
            // or, when a redaction replaced some of it, the record's digest of the original.
            const [record] = output;
            this.outputs.set(
              data.frameId,
              record === undefined ? this.output(digestOfRecorded(data.output)) : this.redactedOutput(record),
            );
          } else if (parsed?.kind === "tool") {
            const [record] = output;
            const result = this.toolContent ? jsonAttribute("gen_ai.tool.call.result", data.output) : {};
            this.outputs.set(data.frameId, {
              ...result,
              ...(record === undefined
                ? data.digest === undefined
                  ? this.output(digestOfRecorded(data.output))
                  : this.output({ digest: data.digest, bytes: data.bytes ?? 0 })
                : isKeyed(record)
                  ? // The frame's own digest is the keyed one, unless its output went to a blob.
                    this.output({
                      digest: keyedDigestKeyId(data.digest) === undefined ? record.digest : (data.digest ?? null),
                    })
                  : this.output({ digest: data.digest ?? record.digest, bytes: data.bytes ?? record.bytes })),
            });
          }
          break;
        }
        case "decision.recorded": {
          const step = decisionStepOf(entry.data.decisionId, "outcome");
          // A failed tool's failure, redacted under a key: its span says nothing of it.
          if (entry.data.source === DECISION_SOURCES.outcome && step !== undefined && records.some(isKeyed))
            this.outputs.set(step, {});
          break;
        }
        default:
          break;
      }
    }
  }

  private started(frameId: string, inputDigest: string): void {
    const parsed = parseFrameId(frameId);
    if (parsed?.kind === "model") {
      this.inputs.set(frameId, this.keyedSeen ? {} : { "loom.input.digest": inputDigest });
      return;
    }
    if (parsed?.kind !== "tool") return;
    const call = this.calls.get(frameId);
    if (call === undefined) {
      // Asked for by a response this process did not append (a resume): its digest alone.
      this.inputs.set(frameId, this.keyedSeen ? {} : { "loom.input.digest": inputDigest });
      return;
    }
    const kept = digestOfRecorded(call.input);
    const args = this.toolContent ? jsonAttribute("gen_ai.tool.call.arguments", call.input) : {};
    if (kept.digest === inputDigest)
      this.inputs.set(frameId, { ...args, "loom.input.digest": inputDigest, "loom.input.bytes": kept.bytes });
    // The input as journaled is not the one digested: a redaction replaced some of it. Under a
    // key its plain digest stays off the span; the plain mode journals it for anyone anyway.
    else this.inputs.set(frameId, { ...args, ...(call.keyed ? {} : { "loom.input.digest": inputDigest }) });
  }

  private output(d: { readonly digest: string | null; readonly bytes?: number }): Attributes {
    const out: Attributes = {};
    if (d.digest !== null && this.outputDigests) out["loom.output.digest"] = d.digest;
    if (d.bytes !== undefined) out["loom.output.bytes"] = d.bytes;
    return out;
  }

  private redactedOutput(record: RedactionRecord): Attributes {
    return this.output(isKeyed(record) ? { digest: record.digest } : record);
  }

  /** The input attributes of step `stepId` (none when its start was not seen here). */
  input(stepId: string): Attributes {
    const attributes = this.inputs.get(stepId) ?? {};
    this.inputs.delete(stepId);
    return attributes;
  }

  /** The output attributes of step `stepId`, if its completion (or keyed failure) was seen here; forgets the step. */
  takeOutput(stepId: string): Attributes | undefined {
    const attributes = this.outputs.get(stepId);
    this.forget(stepId);
    return attributes;
  }

  /** Forgets what was kept of step `stepId` (it ended, or was settled without running). */
  forget(stepId: string): void {
    this.inputs.delete(stepId);
    this.outputs.delete(stepId);
    this.calls.delete(stepId);
  }
}

/** A value as a JSON text attribute (none when it has no JSON text). */
function jsonAttribute(name: string, value: unknown): Attributes {
  try {
    const text = JSON.stringify(value);
    return text === undefined ? {} : { [name]: text };
  } catch {
    return {};
  }
}
