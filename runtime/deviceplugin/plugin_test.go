package deviceplugin

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// kubelet is the kubelet's side of registration, on its socket in dir.
type kubelet struct {
	pluginapi.UnimplementedRegistrationServer
	registered chan *pluginapi.RegisterRequest
}

func (k *kubelet) Register(_ context.Context, r *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	k.registered <- r
	return &pluginapi.Empty{}, nil
}

func startKubelet(t *testing.T, dir string) *kubelet {
	l, err := net.Listen("unix", filepath.Join(dir, "kubelet.sock"))
	if err != nil {
		t.Fatal(err)
	}
	k := &kubelet{registered: make(chan *pluginapi.RegisterRequest, 4)}
	srv := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(srv, k)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return k
}

func (k *kubelet) awaitRegistration(t *testing.T) *pluginapi.RegisterRequest {
	t.Helper()
	select {
	case r := <-k.registered:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the plugin did not register")
		return nil
	}
}

func TestPluginRegistersAndAllocates(t *testing.T) {
	// A short directory: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	k := startKubelet(t, dir)
	p := &Plugin{Resource: "devices.kubevirt.io/tun", Path: "/dev/null", Count: 3, Dir: dir, Socket: "tekvirt-tun.sock"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Start(ctx) }()

	r := k.awaitRegistration(t)
	if r.ResourceName != p.Resource || r.Endpoint != p.Socket || r.Version != pluginapi.Version {
		t.Fatalf("registration %+v", r)
	}
	// As the kubelet: list the devices and allocate one.
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, r.Endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	c := pluginapi.NewDevicePluginClient(conn)
	stream, err := c.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	list, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Devices) != 3 || list.Devices[0].Health != pluginapi.Healthy || list.Devices[0].ID == list.Devices[1].ID {
		t.Fatalf("devices %v", list.Devices)
	}
	alloc, err := c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{list.Devices[0].ID}}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(alloc.ContainerResponses) != 1 || len(alloc.ContainerResponses[0].Devices) != 1 {
		t.Fatalf("allocation %v", alloc.ContainerResponses)
	}
	if d := alloc.ContainerResponses[0].Devices[0]; d.ContainerPath != "/dev/null" || d.HostPath != "/dev/null" || d.Permissions != "rw" {
		t.Fatalf("allocation %v", alloc.ContainerResponses)
	}

	// A restarted kubelet removes the plugins' sockets: the plugin registers again.
	if err := os.Remove(filepath.Join(dir, p.Socket)); err != nil {
		t.Fatal(err)
	}
	k.awaitRegistration(t)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestPluginNeedsItsDevice(t *testing.T) {
	p := &Plugin{Resource: "r/x", Path: "/dev/nonexistent-device", Count: 1, Dir: t.TempDir(), Socket: "x.sock"}
	if err := p.Start(context.Background()); err == nil {
		t.Fatal("started without its device")
	}
}
