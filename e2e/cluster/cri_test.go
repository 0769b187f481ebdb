package cluster

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// initialisingRuntime answers Status as containerd does while its CRI plugin
// starts, then as a ready runtime once ready is set.
type initialisingRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	ready atomic.Bool
}

func (r *initialisingRuntime) Status(context.Context, *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	if !r.ready.Load() {
		return nil, status.Error(codes.Unknown, "server is not initialized yet")
	}
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		{Type: runtimeapi.NetworkReady, Status: false, Reason: "NetworkPluginNotReady"},
	}}}, nil
}

func TestCRIReadyWaitsForTheCRIServiceNotTheSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "containerd.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	rt := &initialisingRuntime{}
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, rt)
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := socketReady(sock)(ctx); err != nil {
		t.Fatalf("socket should accept connections already: %v", err)
	}
	err = criReady(sock)(ctx)
	if err == nil || !strings.Contains(err.Error(), "not initialized") {
		t.Fatalf("criReady while initialising = %v, want the runtime's answer", err)
	}
	rt.ready.Store(true)
	if err := criReady(sock)(ctx); err != nil {
		t.Fatalf("criReady once the runtime is ready (network not ready yet is fine) = %v", err)
	}
}
