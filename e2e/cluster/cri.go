package cluster

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// criReady asks containerd's CRI service for its status. The socket accepts
// connections before the CRI plugin has initialised, and a kubelet started
// in that window exits at once ("server is not initialized yet"), so an open
// socket is not enough.
func criReady(socket string) func(context.Context) error {
	return func(ctx context.Context) error {
		conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return fmt.Errorf("CRI client for %s: %w", socket, err)
		}
		defer func() { _ = conn.Close() }()
		resp, err := runtimeapi.NewRuntimeServiceClient(conn).Status(ctx, &runtimeapi.StatusRequest{})
		if err != nil {
			return fmt.Errorf("CRI status: %w", err)
		}
		for _, cond := range resp.GetStatus().GetConditions() {
			if cond.GetType() == runtimeapi.RuntimeReady && !cond.GetStatus() {
				return fmt.Errorf("CRI runtime not ready: %s %s", cond.GetReason(), cond.GetMessage())
			}
		}
		return nil
	}
}
