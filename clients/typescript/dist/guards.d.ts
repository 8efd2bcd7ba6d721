import type { AgentEvent } from './types.js';
/**
 * Whether `value` has an event's shape: a `type`, `agent`, `timestamp`,
 * `sessionId` and a `payload` (cligent's `isAgentEvent`, the same test). It
 * does not check the payload against the type: moat's events are built to
 * cligent's types, and an extension event's payload is anything.
 */
export declare function isAgentEvent(value: unknown): value is AgentEvent;
//# sourceMappingURL=guards.d.ts.map