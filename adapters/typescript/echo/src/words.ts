/**
 * Splits `text` into words, each keeping the whitespace that follows it,
 * so the pieces concatenate back to `text`; leading whitespace is a piece
 * of its own. The same pieces as the Rust echo's `words`.
 */
export function* words(text: string): Generator<string, void, undefined> {
  // Sticky: each match starts where the last one ended.
  const pattern = /\S*\s*/y;
  while (pattern.lastIndex < text.length) {
    const match = pattern.exec(text);
    if (match === null || match[0] === "") {
      return;
    }
    yield match[0];
  }
}
