// A run's events folded as they come, for its page: the answer's text
// (messages each on their own lines, a message's deltas replaced by its
// whole text when it comes), and the other events in order, each tool
// call with its result.

/// What a run's page holds of its events before the first.
export function newEvents() {
  return { answer: '', segment: 0, items: [], tools: new Map(), count: 0, ended: false, error: null };
}

/// Folds `event` into `s`.
export function fold(s, event) {
  s.count += 1;
  const p = event.payload || {};
  switch (event.type) {
    case 'text_delta':
      // The first delta of a new message starts on a line of its own.
      if (s.answer.length === s.segment) separate(s);
      s.answer += p.delta || '';
      return;
    case 'text':
      // A whole message: the deltas before it, complete (or a message
      // sent without deltas).
      if (s.answer.length > s.segment) s.answer = s.answer.slice(0, s.segment);
      else separate(s);
      s.answer += p.content || '';
      s.segment = s.answer.length;
      return;
    case 'tool_use': {
      const item = { kind: 'tool', use: p, result: null };
      s.tools.set(p.toolUseId, item);
      s.items.push(item);
      return;
    }
    case 'tool_result': {
      const item = s.tools.get(p.toolUseId);
      if (item) item.result = p;
      else s.items.push({ kind: 'tool', use: { toolName: p.toolName, toolUseId: p.toolUseId }, result: p });
      return;
    }
    default:
      s.items.push({ kind: event.type, payload: p, at: event.timestamp });
      // Keep the page light on very long runs: the oldest items go.
      if (s.items.length > 5000) s.items.splice(0, s.items.length - 5000);
  }
}

// Ends the answer so far with a line break before another message, so
// two messages never run together ("Done.Next").
function separate(s) {
  if (s.answer && !/\s$/.test(s.answer)) s.answer += '\n';
  s.segment = s.answer.length;
}
