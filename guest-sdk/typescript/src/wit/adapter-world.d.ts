/// <reference path="./interfaces/moat-adapter-adapter.d.ts" />
/// <reference path="./interfaces/moat-adapter-host.d.ts" />
/// <reference path="./interfaces/moat-adapter-process.d.ts" />
/// <reference path="./interfaces/moat-adapter-runs.d.ts" />
/// <reference path="./interfaces/moat-adapter-types.d.ts" />
declare module 'moat:adapter/adapter-world@0.3.0' {
  export type * as MoatAdapterHost030 from 'moat:adapter/host@0.3.0'; // import moat:adapter/host@0.3.0
  export type * as MoatAdapterProcess030 from 'moat:adapter/process@0.3.0'; // import moat:adapter/process@0.3.0
  export type * as MoatAdapterRuns030 from 'moat:adapter/runs@0.3.0'; // import moat:adapter/runs@0.3.0
  export type * as MoatAdapterTypes030 from 'moat:adapter/types@0.3.0'; // import moat:adapter/types@0.3.0
  export * as adapter from 'moat:adapter/adapter@0.3.0'; // export moat:adapter/adapter@0.3.0
}
