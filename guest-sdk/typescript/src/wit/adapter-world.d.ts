/// <reference path="./interfaces/moat-adapter-adapter.d.ts" />
/// <reference path="./interfaces/moat-adapter-approvals.d.ts" />
/// <reference path="./interfaces/moat-adapter-host.d.ts" />
/// <reference path="./interfaces/moat-adapter-process.d.ts" />
/// <reference path="./interfaces/moat-adapter-runs.d.ts" />
/// <reference path="./interfaces/moat-adapter-types.d.ts" />
declare module 'moat:adapter/adapter-world@0.4.0' {
  export type * as MoatAdapterApprovals040 from 'moat:adapter/approvals@0.4.0'; // import moat:adapter/approvals@0.4.0
  export type * as MoatAdapterHost040 from 'moat:adapter/host@0.4.0'; // import moat:adapter/host@0.4.0
  export type * as MoatAdapterProcess040 from 'moat:adapter/process@0.4.0'; // import moat:adapter/process@0.4.0
  export type * as MoatAdapterRuns040 from 'moat:adapter/runs@0.4.0'; // import moat:adapter/runs@0.4.0
  export type * as MoatAdapterTypes040 from 'moat:adapter/types@0.4.0'; // import moat:adapter/types@0.4.0
  export * as adapter from 'moat:adapter/adapter@0.4.0'; // export moat:adapter/adapter@0.4.0
}
