import { AgentLoopConfigError } from "../../core/errors.ts";
import { isIdName } from "../../events/ids.ts";
import { validateToolCallLogMode } from "../../machines/modePin.machine.ts";
import { DEFINITION_CHANGE_KINDS } from "../../policies/definition.ts";
import { DEFAULT_MODEL_RETRY, DEFAULT_TOOL_RETRY, validateRetryPolicy } from "../../policies/retry.ts";
import type { AgentLoopConfig } from "../base/config.ts";
import { offersSearchTools, SEARCH_TOOLS } from "../steps/builtins.ts";
import { validateToolSources } from "../steps/toolSources.ts";

const fail = (loop: string, what: string) =>
  new AgentLoopConfigError(`loop ${loop}: ${what}; fix the loop's configuration.`, "invalidConfig");

const positiveInteger = (v: unknown) => typeof v === "number" && Number.isInteger(v) && v > 0;

/** Checks a loop's configuration before anything runs; throws `AgentLoopConfigError` naming the field. */
export function validateConfig(config: AgentLoopConfig): void {
  if (typeof config !== "object" || config === null) throw fail("?", "the configuration must be an object");
  const id = config.id;
  if (typeof id !== "string" || !isIdName(id)) {
    throw fail(
      String(id),
      `id must be a non-empty string of letters, digits, "_", ".", ":" or "-" (it prefixes every frame id), not ${JSON.stringify(id)}`,
    );
  }
  if (typeof config.model?.generate !== "function")
    throw fail(id, "model must have a generate({ messages, tools, signal }) method");
  for (const [name, tool] of Object.entries(config.tools ?? {})) {
    if (typeof tool?.execute !== "function")
      throw fail(id, `tool "${name}" must have an execute(input, { stepId, signal }) function`);
    if (typeof tool.description !== "string") throw fail(id, `tool "${name}" must have a description string`);
    if (tool.onUnknownOutcome !== undefined && tool.onUnknownOutcome !== "retry" && tool.onUnknownOutcome !== "fail") {
      throw fail(
        id,
        `tool "${name}": onUnknownOutcome must be "retry" or "fail", not ${JSON.stringify(tool.onUnknownOutcome)}`,
      );
    }
    validateRetryPolicy(tool.retry, DEFAULT_TOOL_RETRY, `tools.${name}.retry`, (m) => fail(id, m));
    if (tool.timeoutMs !== undefined && !positiveInteger(tool.timeoutMs))
      throw fail(id, `tools.${name}.timeoutMs must be a positive integer (ms), not ${String(tool.timeoutMs)}`);
    if (tool.approvalTimeoutMs !== undefined && !positiveInteger(tool.approvalTimeoutMs)) {
      throw fail(
        id,
        `tools.${name}.approvalTimeoutMs must be a positive integer (ms), not ${String(tool.approvalTimeoutMs)}`,
      );
    }
    if (tool.approval !== undefined && typeof tool.approval !== "function")
      throw fail(id, `tools.${name}.approval must be a function (an approval policy)`);
  }
  if (offersSearchTools(config) && Object.hasOwn(config.tools ?? {}, SEARCH_TOOLS)) {
    throw new AgentLoopConfigError(
      `loop ${id}: it has a tool named "${SEARCH_TOOLS}" and searchTools: true offers a built-in of that name; rename the tool or drop searchTools.`,
      "toolNameClash",
    );
  }
  validateToolSources(config, (m) => fail(id, m));
  validateFailurePolicy(config, id);
  if (config.maxIterations !== undefined && !positiveInteger(config.maxIterations)) {
    throw fail(id, `maxIterations must be a positive integer, not ${String(config.maxIterations)}`);
  }
  if (config.maxToolCallsPerResponse !== undefined && !positiveInteger(config.maxToolCallsPerResponse)) {
    throw fail(id, `maxToolCallsPerResponse must be a positive integer, not ${String(config.maxToolCallsPerResponse)}`);
  }
  if (config.maxToolInputBytes !== undefined && !positiveInteger(config.maxToolInputBytes)) {
    throw fail(id, `maxToolInputBytes must be a positive integer, not ${String(config.maxToolInputBytes)}`);
  }
  if (config.approve !== undefined && typeof config.approve !== "function")
    throw fail(id, "approve must be a function");
  if (config.approvalPolicy !== undefined && typeof config.approvalPolicy !== "function")
    throw fail(id, "approvalPolicy must be a function");
  const telemetry = config.telemetry as { startRun?: unknown } | undefined;
  if (telemetry !== undefined && (typeof telemetry !== "object" || typeof telemetry?.startRun !== "function"))
    throw fail(
      id,
      "telemetry must be a RunTelemetry (an object with startRun), such as otelTelemetry() from loom-agent/otel",
    );
  if (config.claimCheck !== undefined) {
    if (typeof config.claimCheck.blobs?.put !== "function") throw fail(id, "claimCheck.blobs must be a BlobStore");
    if (!positiveInteger(config.claimCheck.thresholdBytes))
      throw fail(id, "claimCheck.thresholdBytes must be a positive integer");
  }
  if (config.snapshots !== undefined && config.snapshots !== false) {
    if (typeof config.snapshots !== "object" || config.snapshots === null)
      throw fail(
        id,
        `snapshots must be { every, compact?, onWarning? } or false (none), not ${String(config.snapshots)}; leave it unset for compact snapshots every 1,000 entries`,
      );
    if (!positiveInteger(config.snapshots?.every))
      throw fail(
        id,
        `snapshots.every must be a positive integer (entries between snapshots), not ${String(config.snapshots?.every)}`,
      );
    if (config.snapshots.onWarning !== undefined && typeof config.snapshots.onWarning !== "function")
      throw fail(id, "snapshots.onWarning must be a function");
    if (config.snapshots.compact !== undefined && typeof config.snapshots.compact !== "boolean")
      throw fail(id, `snapshots.compact must be true or false, not ${String(config.snapshots.compact)}`);
  }
  validateToolCallLogMode(config.toolCallLog, id);
  const accept = config.acceptDefinitionChanges;
  if (accept !== undefined && typeof accept !== "function") {
    const bad = Array.isArray(accept) ? accept.find((k) => !DEFINITION_CHANGE_KINDS.includes(k)) : accept;
    if (!Array.isArray(accept) || bad !== undefined) {
      throw fail(
        id,
        `acceptDefinitionChanges must be a predicate or a list of ${DEFINITION_CHANGE_KINDS.map((k) => JSON.stringify(k)).join(", ")}; ${JSON.stringify(bad) ?? String(bad)} is not one`,
      );
    }
  }
}

const RETRY_KEYS = ["model", "tools"];
const TIMEOUT_KEYS = ["modelAttemptMs", "firstChunkMs", "chunkIdleMs", "toolMs", "runMs"];

/** `retry` and `timeouts`: known keys only. */
function validateFailurePolicy(config: AgentLoopConfig, id: string): void {
  const { retry, timeouts } = config;
  if (retry !== undefined) {
    if (typeof retry !== "object" || retry === null) throw fail(id, "retry must be an object { model?, tools? }");
    const unknown = Object.keys(retry).find((k) => !RETRY_KEYS.includes(k));
    if (unknown !== undefined) throw fail(id, `retry.${unknown} is not a setting; retry takes model and tools`);
    validateRetryPolicy(retry.model, DEFAULT_MODEL_RETRY, "retry.model", (m) => fail(id, m));
    validateRetryPolicy(retry.tools, DEFAULT_TOOL_RETRY, "retry.tools", (m) => fail(id, m));
  }
  if (timeouts !== undefined) {
    if (typeof timeouts !== "object" || timeouts === null) throw fail(id, "timeouts must be an object");
    for (const [key, value] of Object.entries(timeouts)) {
      if (!TIMEOUT_KEYS.includes(key)) {
        throw fail(id, `timeouts.${key} is not a setting (yet); timeouts takes ${TIMEOUT_KEYS.join(", ")}`);
      }
      if (value !== undefined && !positiveInteger(value))
        throw fail(id, `timeouts.${key} must be a positive integer (ms), not ${String(value)}`);
    }
  }
}
