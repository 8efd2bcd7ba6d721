// Compiled with `tsc --noEmit` by `npm test` (test/tsconfig.cligent.json):
// the client's event and usage types against cligent's own
// (tests/fixtures/cligent/types.ts, copied unchanged from
// sublang-ai/cligent). A cligent consumer must accept every moat event, and
// moat's types may have no field cligent's lack. Never run.
import type * as cligent from '../../../tests/fixtures/cligent/types.js';
import type * as moat from '../dist/index.js';

/** Compiles only when `T` is `true`. */
type Assert<T extends true> = T;
/** Whether every `A` is a `B`. */
type Extends<A, B> = [A] extends [B] ? true : false;
/** Whether `A` and `B` are each other's. */
type Same<A, B> = Extends<A, B> extends true ? Extends<B, A> : false;
/**
 * Whether `A` and `B` have the same keys, deeply through objects and arrays
 * (a map, `{[key: string]: …}`, is a leaf: only assignability counts there).
 */
type SameKeys<A, B> = string extends keyof A
  ? Same<A, B>
  : [A] extends [readonly (infer X)[]]
  ? [B] extends [readonly (infer Y)[]]
    ? SameKeys<X, Y>
    : false
  : [A] extends [object]
    ? [B] extends [object]
      ? Same<keyof A, keyof B> extends true
        ? { [K in keyof A & keyof B]-?: SameKeys<NonNullable<A[K]>, NonNullable<B[K]>> }[keyof A & keyof B] extends true
          ? true
          : false
        : false
      : false
    : true;

/** The member of a union of events whose `type` is `T`. */
type Member<E, T extends string> = E extends { type: infer U } ? (T extends U ? E : never) : never;

// A cligent consumer takes every moat event, and moat's stream takes every cligent event.
export type EventsAreCligents = Assert<Extends<moat.AgentEvent, cligent.AgentEvent>>;
export type EventsAreCligentEvents = Assert<Extends<moat.AgentEvent, cligent.CligentEvent>>;
export type CligentEventsAreMoats = Assert<Extends<cligent.CligentEvent, moat.AgentEvent>>;
export type CligentEventIsOurs = Assert<Same<moat.CligentEvent, moat.AgentEvent>>;

// Each payload has exactly cligent's fields (an extra optional field would
// still be assignable: keys are compared too), deeply.
export type Init = Assert<Same<moat.InitPayload, cligent.InitPayload>>;
export type InitKeys = Assert<SameKeys<moat.InitPayload, cligent.InitPayload>>;
export type Text = Assert<SameKeys<moat.TextPayload, cligent.TextPayload>>;
export type TextDelta = Assert<SameKeys<moat.TextDeltaPayload, cligent.TextDeltaPayload>>;
export type Thinking = Assert<SameKeys<moat.ThinkingPayload, cligent.ThinkingPayload>>;
export type ToolUse = Assert<Same<moat.ToolUsePayload, cligent.ToolUsePayload>>;
export type ToolUseKeys = Assert<SameKeys<moat.ToolUsePayload, cligent.ToolUsePayload>>;
export type ToolResult = Assert<Same<moat.ToolResultPayload, cligent.ToolResultPayload>>;
export type ToolResultKeys = Assert<SameKeys<moat.ToolResultPayload, cligent.ToolResultPayload>>;
export type Permission = Assert<SameKeys<moat.PermissionRequestPayload, cligent.PermissionRequestPayload>>;
export type Error_ = Assert<Same<moat.ErrorPayload, cligent.ErrorPayload>>;
export type Done = Assert<Same<moat.DonePayload, cligent.DonePayload>>;
export type DoneKeys = Assert<SameKeys<moat.DonePayload, cligent.DonePayload>>;

// Usage: one shape, the done's and the result's.
export type DoneUsage = Assert<Same<moat.DoneUsage, cligent.DoneUsage>>;
export type DoneUsageKeys = Assert<SameKeys<moat.DoneUsage, cligent.DoneUsage>>;
export type ResultUsage = Assert<Same<moat.EngineResult['usage'], cligent.DoneUsage>>;
export type Report = Assert<SameKeys<moat.TokenUsageReport, cligent.TokenUsageReport>>;
export type Record_ = Assert<SameKeys<moat.UsageRecord, cligent.UsageRecord>>;
export type Cost = Assert<Same<moat.UsageCost, cligent.UsageCost>>;
export type CostSource = Assert<Same<moat.UsageCostSource, cligent.UsageCostSource>>;
export type Coverage = Assert<Same<moat.UsageCoverage, cligent.UsageCoverage>>;

// The fields every event has: cligent's BaseEvent and CligentEvent's role.
export type Base = Assert<
  Same<Exclude<keyof moat.InitEvent, 'payload'>, keyof cligent.BaseEvent | 'role'>
>;
export type InitMember = Assert<Extends<moat.InitEvent, Member<cligent.CligentEvent, 'init'>>>;
export type DoneMember = Assert<Extends<moat.DoneEvent, Member<cligent.CligentEvent, 'done'>>>;
export type Extension = Assert<Extends<moat.ExtensionEvent, Member<cligent.CligentEvent, 'moat:resume_fallback'>>>;
export type EventTypes = Assert<Same<moat.AgentEventType, cligent.AgentEventType>>;
export type EventMap = Assert<Same<keyof moat.AgentEventMap, cligent.AgentEventType>>;
