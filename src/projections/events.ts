/**
 * A run's events (`loop.stream`, `followRun`, the AI SDK's stream): their types (runEvents.ts) and
 * the pure fold from journal entries to them (eventFold.ts), read from one place.
 */

export {
  evolveRunEvents,
  initialRunEventState,
  isRunEnd,
  type RunEventOptions,
  type RunEventState,
  runEventsOf,
} from "./eventFold.ts";
export {
  endsItsEntry,
  type JournaledEventFields,
  type JournaledRunEvent,
  type LiveEventFields,
  type LiveRunEvent,
  type RunEvent,
  type RunEventCursor,
  type RunEventError,
  type RunEventType,
} from "./runEvents.ts";
