// Envoy's ext_proc v3 service and gRPC's health service as grpc-js loads them:
// from protos.binpb, the descriptors hack/ext-proc-protos.sh takes from the Go
// modules Envoy 1.40's API is published in (go-control-plane/envoy v1.40.0).

import { readFileSync } from 'node:fs';
import { loadFileDescriptorSetFromBuffer, type PackageDefinition } from '@grpc/proto-loader';
import type { ServiceDefinition } from '@grpc/grpc-js';

export const EXT_PROC_SERVICE = 'envoy.service.ext_proc.v3.ExternalProcessor';

let loaded: PackageDefinition | undefined;

/** The package definition, loaded once: field names as in the protos, enums as names, bytes as Buffers. */
export function loadProtos(): PackageDefinition {
  loaded ??= loadFileDescriptorSetFromBuffer(readFileSync(new URL('./protos.binpb', import.meta.url)), {
    keepCase: true,
    enums: String,
    longs: Number,
    defaults: false,
    oneofs: true,
  });
  return loaded;
}

export function extProcService(): ServiceDefinition {
  return loadProtos()[EXT_PROC_SERVICE] as ServiceDefinition;
}
