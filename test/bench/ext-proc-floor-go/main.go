// The endpoint picker's seat without Node: an ext_proc server on grpc-go (the stack GIE's
// reference picker runs on) that makes no decision, answering as test/bench/ext-proc-floor.ts
// does: it holds the body, names one fixed upstream and sends the body back unchanged. The
// overhead phase measures Envoy asking it beside the Node floor and the picker, so the report
// says what the seat itself costs (Envoy's ext_proc and a compiled gRPC server) on this machine.
//
//	ext-proc-floor-go --upstream 127.0.0.1:P [--port 0]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extproc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"
)

// GIE's reference picker sends body chunks of at most this many bytes (pkg/common/envoy/chunking.go).
const bodyChunkBytes = 62_000

type floor struct {
	extproc.UnimplementedExternalProcessorServer
	upstream string
}

func (f *floor) pick() *extproc.ProcessingResponse {
	meta, _ := structpb.NewStruct(map[string]any{
		"envoy.lb": map[string]any{"x-gateway-destination-endpoint": f.upstream},
	})
	return &extproc.ProcessingResponse{
		Response: &extproc.ProcessingResponse_RequestHeaders{RequestHeaders: &extproc.HeadersResponse{
			Response: &extproc.CommonResponse{
				ClearRouteCache: true,
				HeaderMutation: &extproc.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{{
					Header:       &corev3.HeaderValue{Key: "x-gateway-destination-endpoint", RawValue: []byte(f.upstream)},
					AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
				}}},
			},
		}},
		DynamicMetadata: meta,
	}
}

func bodyChunks(body []byte) []*extproc.ProcessingResponse {
	var out []*extproc.ProcessingResponse
	for start := 0; start < len(body) || start == 0; start += bodyChunkBytes {
		end := min(start+bodyChunkBytes, len(body))
		out = append(out, &extproc.ProcessingResponse{
			Response: &extproc.ProcessingResponse_RequestBody{RequestBody: &extproc.BodyResponse{
				Response: &extproc.CommonResponse{BodyMutation: &extproc.BodyMutation{
					Mutation: &extproc.BodyMutation_StreamedResponse{StreamedResponse: &extproc.StreamedBodyResponse{
						Body: body[start:end], EndOfStream: end == len(body),
					}},
				}},
			}},
		})
		if end == len(body) {
			break
		}
	}
	return out
}

func (f *floor) Process(stream extproc.ExternalProcessor_ProcessServer) error {
	var body []byte
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err // Envoy's cancel at the request's end
		}
		switch m := req.Request.(type) {
		case *extproc.ProcessingRequest_RequestBody:
			body = append(body, m.RequestBody.Body...)
			if !m.RequestBody.EndOfStream {
				continue
			}
			if err := stream.Send(f.pick()); err != nil {
				return err
			}
			for _, c := range bodyChunks(body) {
				if err := stream.Send(c); err != nil {
					return err
				}
			}
		case *extproc.ProcessingRequest_ResponseHeaders:
			if err := stream.Send(&extproc.ProcessingResponse{
				Response: &extproc.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extproc.HeadersResponse{}},
			}); err != nil {
				return err
			}
		}
	}
}

func main() {
	upstream := flag.String("upstream", "", "host:port every pick names")
	port := flag.Int("port", 0, "port to listen on (0: any)")
	flag.Parse()
	if *upstream == "" {
		fmt.Fprintln(os.Stderr, "ext-proc-floor-go: --upstream host:port is required")
		os.Exit(2)
	}
	lis, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s := grpc.NewServer()
	extproc.RegisterExternalProcessorServer(s, &floor{upstream: *upstream})
	line, _ := json.Marshal(map[string]any{"msg": "listening", "pickerPort": lis.Addr().(*net.TCPAddr).Port})
	fmt.Println(string(line))
	if err := s.Serve(lis); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
