// Writes the FileDescriptorSet the gateway's endpoint picker (gateway/src/epp) loads:
// Envoy's ext_proc v3 service and gRPC's health service, with every file they import,
// taken from the descriptors compiled into the pinned Go modules (go.mod): the same
// protos Envoy 1.40 is built from, not copied by hand. `make ext-proc-protos` runs it;
// `make ext-proc-protos-check` fails when the committed set differs.
package main

import (
	"fmt"
	"os"
	"sort"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	healthv1 "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: ext-proc-protos OUT.binpb")
		os.Exit(2)
	}
	roots := []protoreflect.FileDescriptor{
		extprocv3.File_envoy_service_ext_proc_v3_external_processor_proto,
		healthv1.File_grpc_health_v1_health_proto,
	}
	seen := map[string]*descriptorpb.FileDescriptorProto{}
	var walk func(fd protoreflect.FileDescriptor)
	walk = func(fd protoreflect.FileDescriptor) {
		if _, ok := seen[fd.Path()]; ok {
			return
		}
		seen[fd.Path()] = protodesc.ToFileDescriptorProto(fd)
		imports := fd.Imports()
		for i := 0; i < imports.Len(); i++ {
			walk(imports.Get(i).FileDescriptor)
		}
	}
	for _, r := range roots {
		walk(r)
	}
	// Sorted by path: the same modules give the same bytes.
	paths := make([]string, 0, len(seen))
	for p := range seen {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	set := &descriptorpb.FileDescriptorSet{}
	for _, p := range paths {
		set.File = append(set.File, seen[p])
	}
	out, err := proto.MarshalOptions{Deterministic: true}.Marshal(set)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile(os.Args[1], out, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "%d files, %d bytes\n", len(set.File), len(out))
}
