/**
 * The contract's types, as generated from `wit/v0.4.0` (see
 * `src/wit/README.md`), re-exported under the names adapter authors use.
 *
 * Type-only: nothing here exists at run time.
 */

/// <reference path="./wit/adapter-world.d.ts" />

export type {
  AdapterInfo,
  Cost,
  CostSource,
  DoneEvent,
  DoneStatus,
  ErrorInfo,
  Event,
  EventKind,
  Needs,
  Options,
  TokenCoverage,
  ToolStatus,
  TrustLevel,
  Usage,
} from "moat:adapter/types@0.4.0";

/** The contract this SDK builds against (the WIT package and version). */
export const CONTRACT_VERSION = "moat:adapter@0.4.0";
