package hostpathcsi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"k8s.io/klog/v2"
	registration "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// Serve answers CSI calls on the unix socket csiSocket until ctx ends.
// With regSocket set, it also registers the driver with the kubelet: the
// kubelet finds regSocket in its plugins_registry directory and is told
// the CSI socket as the kubelet itself reaches it, kubeletCSISocket.
func (d *Driver) Serve(ctx context.Context, csiSocket, regSocket, kubeletCSISocket string) error {
	csiL, err := listenUnix(csiSocket)
	if err != nil {
		return err
	}
	var regL net.Listener
	if regSocket != "" {
		if regL, err = listenUnix(regSocket); err != nil {
			csiL.Close()
			return err
		}
	}
	return d.serve(ctx, csiL, regL, kubeletCSISocket)
}

// serve answers CSI calls on csiL and, when regL is set, the kubelet's
// registration on regL, until ctx ends.
func (d *Driver) serve(ctx context.Context, csiL, regL net.Listener, kubeletCSISocket string) error {
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(logCalls))
	csi.RegisterIdentityServer(srv, d)
	csi.RegisterControllerServer(srv, d)
	csi.RegisterNodeServer(srv, d)
	servers := []*grpc.Server{srv}
	listeners := map[*grpc.Server]net.Listener{srv: csiL}
	if regL != nil {
		reg := grpc.NewServer()
		registration.RegisterRegistrationServer(reg, &registrar{endpoint: kubeletCSISocket})
		servers = append(servers, reg)
		listeners[reg] = regL
	}
	errs := make(chan error, len(servers))
	for _, s := range servers {
		go func() { errs <- s.Serve(listeners[s]) }()
	}
	select {
	case <-ctx.Done():
	case err := <-errs:
		for _, s := range servers {
			s.Stop()
		}
		return err
	}
	for _, s := range servers {
		stopped := make(chan struct{})
		go func() { s.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(stopGrace):
			s.Stop()
		}
	}
	return nil
}

// stopGrace is how long calls under way may finish once Serve is asked to
// stop.
const stopGrace = 10 * time.Second

// listenUnix listens on path, replacing a socket left by an earlier
// process.
func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	return l, nil
}

// logCalls logs each call that changes something, and every failure.
func logCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	resp, err := next(ctx, req)
	switch {
	case err != nil:
		klog.FromContext(ctx).Error(err, "CSI call failed", "method", info.FullMethod)
	case !readOnlyCall[filepath.Base(info.FullMethod)]:
		klog.FromContext(ctx).Info("CSI call", "method", info.FullMethod, "request", req)
	}
	return resp, err
}

// readOnlyCall are the calls that change nothing: not logged when they
// succeed (the kubelet and the sidecars probe often).
var readOnlyCall = map[string]bool{
	"Probe": true, "GetPluginInfo": true, "GetPluginCapabilities": true,
	"ControllerGetCapabilities": true, "NodeGetCapabilities": true, "NodeGetInfo": true,
	"NodeGetVolumeStats": true, "ValidateVolumeCapabilities": true,
}

// registrar answers the kubelet's plugin registration.
type registrar struct {
	registration.UnimplementedRegistrationServer
	endpoint string
}

// GetInfo tells the kubelet the driver's name and CSI socket.
func (r *registrar) GetInfo(context.Context, *registration.InfoRequest) (*registration.PluginInfo, error) {
	return &registration.PluginInfo{Type: registration.CSIPlugin, Name: DriverName, Endpoint: r.endpoint, SupportedVersions: []string{"1.0.0"}}, nil
}

// NotifyRegistrationStatus logs the kubelet's answer; a refusal is fatal
// for the driver, which the kubelet would never call.
func (r *registrar) NotifyRegistrationStatus(ctx context.Context, st *registration.RegistrationStatus) (*registration.RegistrationStatusResponse, error) {
	if !st.PluginRegistered {
		klog.FromContext(ctx).Error(errors.New(st.Error), "the kubelet refused the driver's registration")
		os.Exit(1)
	}
	klog.FromContext(ctx).Info("registered with the kubelet", "driver", DriverName, "endpoint", r.endpoint)
	return &registration.RegistrationStatusResponse{}, nil
}
