package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// checkEvery is how often the plugin looks whether the kubelet removed
// its socket (the kubelet restarted and forgot it).
const checkEvery = 2 * time.Second

// Plugin advertises Count devices of Resource, each of which is Path.
type Plugin struct {
	// Resource is the extended resource's name ("devices.kubevirt.io/tun").
	Resource string
	// Path is the device node, the same on the node and in the container.
	Path string
	// Count is how many containers of the node may hold one at a time.
	Count int
	// Dir is the kubelet's device-plugins directory, with kubelet.sock;
	// empty means pluginapi.DevicePluginPath.
	Dir string
	// Socket is the plugin's socket's name in Dir.
	Socket string

	pluginapi.UnimplementedDevicePluginServer
}

func (p *Plugin) dir() string {
	if p.Dir == "" {
		return pluginapi.DevicePluginPath
	}
	return p.Dir
}

// Start serves and registers the plugin until ctx ends, serving and
// registering again when the kubelet removed its socket.
func (p *Plugin) Start(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx).WithValues("resource", p.Resource)
	if _, err := os.Stat(p.Path); err != nil {
		return fmt.Errorf("device plugin %s: %w", p.Resource, err)
	}
	for {
		err := p.serveOnce(ctx, log)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			log.Error(err, "device plugin; trying again")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(checkEvery):
		}
	}
}

// serveOnce serves on a new socket, registers it and returns when the
// socket is gone or ctx ends.
func (p *Plugin) serveOnce(ctx context.Context, log logr.Logger) error {
	path := filepath.Join(p.dir(), p.Socket)
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", path, err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	defer srv.Stop()
	if err := p.register(ctx); err != nil {
		return err
	}
	log.Info("device plugin registered with the kubelet", "devices", p.Count)
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-served:
			return fmt.Errorf("serving %s: %w", path, err)
		case <-time.After(checkEvery):
			if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
				log.Info("the kubelet removed the device plugin's socket; registering again")
				return nil
			}
		}
	}
}

func (p *Plugin) register(ctx context.Context) error {
	conn, err := grpc.NewClient("unix://"+filepath.Join(p.dir(), filepath.Base(pluginapi.KubeletSocket)), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("the kubelet's registration socket: %w", err)
	}
	defer func() { _ = conn.Close() }()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(rctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     p.Socket,
		ResourceName: p.Resource,
	})
	if err != nil {
		return fmt.Errorf("registering %s with the kubelet: %w", p.Resource, err)
	}
	return nil
}

// GetDevicePluginOptions asks for nothing before a container starts.
func (p *Plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

// ListAndWatch lists the devices, all healthy, and holds the stream open.
func (p *Plugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	devs := make([]*pluginapi.Device, p.Count)
	for i := range devs {
		devs[i] = &pluginapi.Device{ID: p.Socket + "-" + strconv.Itoa(i), Health: pluginapi.Healthy}
	}
	if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

// Allocate gives each requesting container the device node, read-write.
func (p *Plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	out := &pluginapi.AllocateResponse{}
	for range req.ContainerRequests {
		out.ContainerResponses = append(out.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Devices: []*pluginapi.DeviceSpec{{ContainerPath: p.Path, HostPath: p.Path, Permissions: "rw"}},
		})
	}
	return out, nil
}
