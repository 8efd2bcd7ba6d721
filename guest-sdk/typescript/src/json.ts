/**
 * JSON values as they cross the component boundary.
 *
 * The contract carries free-form JSON (tool input and output, metadata,
 * capabilities, extension payloads, `options.extra`) as strings, which the
 * host parses and validates. This module turns values into those strings
 * and back; it never validates on the host's behalf.
 *
 * Host-independent: usable (and tested) outside a component.
 */

/** Any JSON value. */
export type JsonValue = null | boolean | number | string | JsonValue[] | JsonObject;

/** A JSON object. */
export interface JsonObject {
  [key: string]: JsonValue;
}

/** The error code of a refusal caused by malformed options. */
export const INVALID_OPTIONS = "INVALID_OPTIONS";

/**
 * `value` as JSON text.
 *
 * Throws a `TypeError` naming `field` when the value has no JSON form
 * (`undefined`, a function, a `BigInt`): a JSON field must always be sent
 * as valid JSON, so the mistake surfaces where it was made.
 */
export function encodeJson(field: string, value: JsonValue): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (error) {
    throw new TypeError(`${field} is not JSON: ${String(error)}`);
  }
  if (typeof text !== "string") {
    throw new TypeError(`${field} is not JSON: ${typeof value}`);
  }
  return text;
}

/** Whether `value` is a JSON object (not an array, not null). */
export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Parses the JSON object text of option `field`; `undefined` when absent.
 * Throws `{ code: INVALID_OPTIONS }`-shaped errors through `invalid`, so
 * the caller decides how a refusal is raised.
 */
export function parseJsonObject(
  field: string,
  text: string | undefined,
  invalid: (message: string) => Error,
): JsonObject | undefined {
  if (text === undefined) {
    return undefined;
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw invalid(`${field} is not valid JSON: ${String(error)}`);
  }
  if (!isJsonObject(value)) {
    throw invalid(`${field} must be a JSON object`);
  }
  return value;
}
