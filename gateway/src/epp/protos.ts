// Envoy's ext_proc v3 service and gRPC's health service, from protos.binpb:
// the descriptors hack/ext-proc-protos.sh takes from the Go modules Envoy 1.40's
// API is published in (go-control-plane/envoy v1.40.0).
//
// The picker's ext_proc service is built on protobufjs directly (ADR 0055):
// proto-loader's deserializer decodes each message into protobufjs instances
// and copies them into plain objects (toObject), its serializer copies plain
// objects into instances (fromObject) before encoding: two copies of every
// message, several a request. Here a message decodes once, into objects that
// read as proto-loader's plain ones (defaults: false, oneofs: true: only the
// fields present are own properties, the oneof's name is a getter), and an
// answer is encoded as it is built. What differs, and nothing the picker
// reads or writes depends on: enums are numbers both ways (answers.ts writes
// theirs as numbers) and int64 fields decode as Long.

import { readFileSync } from 'node:fs';
import { loadFileDescriptorSetFromBuffer, type PackageDefinition } from '@grpc/proto-loader';
import type { ServiceDefinition } from '@grpc/grpc-js';
import protobuf from 'protobufjs';
// Adds Root.fromDescriptor to protobufjs (the package's own descriptor support).
import 'protobufjs/ext/descriptor/index.js';

export const EXT_PROC_SERVICE = 'envoy.service.ext_proc.v3.ExternalProcessor';

const PROTOS = new URL('./protos.binpb', import.meta.url);

let loaded: PackageDefinition | undefined;

/**
 * The package definition as @grpc/proto-loader builds it, loaded once: field names as in the
 * protos, enums as names, bytes as Buffers. For clients that want its plain objects (the tests'
 * gRPC health client); the picker serves ext_proc with extProcService.
 */
export function loadProtos(): PackageDefinition {
  loaded ??= loadFileDescriptorSetFromBuffer(readFileSync(PROTOS), {
    keepCase: true,
    enums: String,
    longs: Number,
    defaults: false,
    oneofs: true,
  });
  return loaded;
}

/** protobufjs's Root with ext/descriptor's addition (its typings leave it out). */
const DescriptorRoot = protobuf.Root as typeof protobuf.Root & {
  fromDescriptor(set: Uint8Array): protobuf.Root;
};

let service: ServiceDefinition | undefined;

/** Envoy's ext_proc service for grpc-js, its messages encoded and decoded by protobufjs. */
export function extProcService(): ServiceDefinition {
  service ??= buildExtProcService();
  return service;
}

function buildExtProcService(): ServiceDefinition {
  const root = DescriptorRoot.fromDescriptor(readFileSync(PROTOS));
  readAsPlainObjects(root);
  const method = root.lookupService(EXT_PROC_SERVICE).methods['Process'];
  if (!method?.resolvedRequestType || !method.resolvedResponseType)
    throw new Error(`protos.binpb: ${EXT_PROC_SERVICE}/Process is missing or unresolved`);
  const request = method.resolvedRequestType;
  const response = method.resolvedResponseType;
  return {
    Process: {
      path: `/${EXT_PROC_SERVICE}/Process`,
      requestStream: true,
      responseStream: true,
      requestSerialize: (msg: object) => encode(request, msg),
      requestDeserialize: (bytes: Buffer) => request.decode(bytes),
      responseSerialize: (msg: object) => encode(response, msg),
      responseDeserialize: (bytes: Buffer) => response.decode(bytes),
      originalName: 'process',
    },
  };
}

/**
 * A message as built (plain objects, enums as numbers, bytes as Buffers), encoded without
 * fromObject's copy. On Node protobufjs writes into a Buffer; the other case only for the type.
 */
function encode(type: protobuf.Type, msg: object): Buffer {
  const bytes = type.encode(msg).finish();
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * Decoded messages read as proto-loader's plain objects (defaults: false). protobufjs's own
 * message classes keep each field's default on the prototype (an absent message field reads
 * null, absent bytes an empty array), give every repeated field an empty array, and have
 * enumerable `$type`, `constructor` and `toJSON` behind them. Each type here gets a constructor
 * that sets nothing (the decoder makes the repeated fields present) and a prototype keeping
 * only, not enumerable, its oneofs' getters (`request` names the member present), `$type` and
 * `constructor`. Done once, before any message decodes: the fields are resolved by then, so
 * protobufjs writes no default onto the new prototypes (deleted anyway, should it have).
 */
function readAsPlainObjects(ns: protobuf.NamespaceBase): void {
  for (const nested of ns.nestedArray) {
    if (nested instanceof protobuf.Type) {
      nested.ctor = function DecodedMessage() {} as unknown as protobuf.Constructor<object>;
      const proto = nested.ctor.prototype as Record<string, unknown>;
      for (const field of nested.fieldsArray) delete proto[field.name];
      for (const key of ['$type', 'constructor'])
        Object.defineProperty(proto, key, { value: proto[key], enumerable: false, writable: true });
      Object.setPrototypeOf(proto, Object.prototype);
    }
    if (nested instanceof protobuf.Namespace) readAsPlainObjects(nested);
  }
}
