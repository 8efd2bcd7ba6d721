// The event guards cligent exports (sublang-ai/cligent, src/events.ts), so
// that code using them ports by changing its import.
import type { AgentEvent } from './types.js';

/**
 * Whether `value` has an event's shape: a `type`, `agent`, `timestamp`,
 * `sessionId` and a `payload` (cligent's `isAgentEvent`, the same test). It
 * does not check the payload against the type: moat's events are built to
 * cligent's types, and an extension event's payload is anything.
 */
export function isAgentEvent(value: unknown): value is AgentEvent {
  if (typeof value !== 'object' || value === null) return false;
  const obj = value as Record<string, unknown>;
  return (
    typeof obj['type'] === 'string' &&
    typeof obj['agent'] === 'string' &&
    typeof obj['timestamp'] === 'number' &&
    typeof obj['sessionId'] === 'string' &&
    'payload' in obj
  );
}
