// The fold of a run's events into its page's answer (src/fold.js), on
// the shapes of events the backends send: run by tests/all/ui.rs with the
// browser suite.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fold, newEvents } from '../src/fold.js';

const delta = (text) => ({ type: 'text_delta', payload: { delta: text } });
const whole = (text) => ({ type: 'text', payload: { content: text } });
const folded = (events) => {
  const s = newEvents();
  for (const event of events) fold(s, event);
  return s;
};

test('messages streamed as deltas, each then sent whole, are not run together', () => {
  const s = folded([
    delta('Let me '), delta('look.'), whole('Let me look.'),
    { type: 'tool_use', payload: { toolName: 'Read', toolUseId: 't1', input: {} } },
    { type: 'tool_result', payload: { toolName: 'Read', toolUseId: 't1', status: 'success', output: 'x' } },
    delta('Done'), delta('.'), whole('Done.'),
  ]);
  assert.equal(s.answer, 'Let me look.\nDone.');
  assert.equal(s.items.length, 1, 'the tool call with its result');
  assert.equal(s.items[0].result.status, 'success');
});

test('whole messages without deltas, and deltas never sent whole, each keep their line', () => {
  assert.equal(folded([whole('tick 1'), whole('tick 2')]).answer, 'tick 1\ntick 2');
  assert.equal(folded([delta('a'), delta('b')]).answer, 'ab');
  assert.equal(folded([whole('First.\n'), delta('Second')]).answer, 'First.\nSecond');
});

test('a whole message that differs from its deltas replaces them', () => {
  assert.equal(folded([whole('One.'), delta('Tw'), whole('Two.')]).answer, 'One.\nTwo.');
});
