// The shapes `moat serve` speaks (docs/protocol.md,
// protocol/moat-protocol.schema.json). Field names are the wire's.
export {};
//# sourceMappingURL=types.js.map