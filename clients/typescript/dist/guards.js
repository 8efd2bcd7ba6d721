/**
 * Whether `value` has an event's shape: a `type`, `agent`, `timestamp`,
 * `sessionId` and a `payload` (cligent's `isAgentEvent`, the same test). It
 * does not check the payload against the type: moat's events are built to
 * cligent's types, and an extension event's payload is anything.
 */
export function isAgentEvent(value) {
    if (typeof value !== 'object' || value === null)
        return false;
    const obj = value;
    return (typeof obj['type'] === 'string' &&
        typeof obj['agent'] === 'string' &&
        typeof obj['timestamp'] === 'number' &&
        typeof obj['sessionId'] === 'string' &&
        'payload' in obj);
}
//# sourceMappingURL=guards.js.map