package hostpathcsi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Driver serves CSI's identity, controller and node services for one node.
type Driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	csi.UnimplementedNodeServer

	// Node is this node's name, its CSI node ID.
	Node string
	// Root holds this node's volumes and, in .snapshots, their snapshots.
	Root string
	// SharedRoot holds the shared volumes and their snapshots; "" when
	// this node has none.
	SharedRoot string
	// Version is the driver's version, as GetPluginInfo reports it.
	Version string
	// CheckShared, when set, says why a shared volume cannot be made
	// (the shared root does not show every node), nil when it can.
	CheckShared func(ctx context.Context) error
	// Placement, when set, says why this node should not hold the local
	// volume of the claim namespace/name (it is cordoned), nil when it
	// may; the external-provisioner then lets another node take the claim.
	Placement func(ctx context.Context, namespace, name string) error

	// busy holds the names being made or removed: a sidecar that timed
	// out asks again while a long copy still runs, and is told to wait.
	busy sync.Map
}

// claim marks the volume or snapshot at dir busy, or says it already is
// (codes.Aborted: the sidecars retry); release ends it.
func (d *Driver) claim(dir string) (release func(), err error) {
	if _, loaded := d.busy.LoadOrStore(dir, struct{}{}); loaded {
		return nil, status.Errorf(codes.Aborted, "an operation on %s is under way", filepath.Base(dir))
	}
	return func() { d.busy.Delete(dir) }, nil
}

// snapshotsDir is the directory of a root holding its snapshots; volume
// names are DNS subdomains and never start with a dot.
const snapshotsDir = ".snapshots"

// Probe reports the driver ready once its roots are there.
func (d *Driver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	for _, r := range []string{d.Root, d.SharedRoot} {
		if r == "" {
			continue
		}
		if _, err := os.Stat(r); err != nil {
			return nil, status.Errorf(codes.FailedPrecondition, "root %s: %v", r, err)
		}
	}
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}

// GetPluginInfo names the driver.
func (d *Driver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	v := d.Version
	if v == "" {
		v = "devel"
	}
	return &csi.GetPluginInfoResponse{Name: DriverName, VendorVersion: v}, nil
}

// GetPluginCapabilities says the driver has a controller service and
// node-local volumes.
func (d *Driver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{
		{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_CONTROLLER_SERVICE}}},
		{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS}}},
	}}, nil
}

// root is the directory holding what is at l: this node's root or the
// shared one. A location on another node is not here.
func (d *Driver) root(l location) (string, error) {
	switch {
	case l.Node == "" && d.SharedRoot == "":
		return "", status.Errorf(codes.FailedPrecondition, "%s is on the shared root, which node %s does not have", l, d.Node)
	case l.Node == "":
		return d.SharedRoot, nil
	case l.Node != d.Node:
		return "", status.Errorf(codes.FailedPrecondition, "%s is on node %s, not on %s", l, l.Node, d.Node)
	}
	return d.Root, nil
}

// volumeDir is the directory of the volume at l.
func (d *Driver) volumeDir(l location) (string, error) {
	r, err := d.root(l)
	if err != nil {
		return "", err
	}
	return filepath.Join(r, l.Name), nil
}

// existingVolume is the location and directory of the volume id, which
// must be here (codes.NotFound when it is not, or is no volume of the
// driver's).
func (d *Driver) existingVolume(id string) (location, string, error) {
	l, err := parseLocation(id)
	if err != nil {
		return location{}, "", errorf(codes.NotFound, "volume: %v", err)
	}
	dir, err := d.volumeDir(l)
	if err != nil {
		return location{}, "", err
	}
	if ok, err := exists(dir); err != nil {
		return location{}, "", err
	} else if !ok {
		return location{}, "", errorf(codes.NotFound, "volume %s does not exist", l)
	}
	return l, dir, nil
}

// snapshotDir is the directory of the snapshot at l.
func (d *Driver) snapshotDir(l location) (string, error) {
	r, err := d.root(l)
	if err != nil {
		return "", err
	}
	return filepath.Join(r, snapshotsDir, l.Name), nil
}

// exists says whether dir is there (and a directory); a link is not.
func exists(dir string) (bool, error) {
	st, err := os.Lstat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	case err != nil:
		return false, status.Error(codes.Internal, err.Error())
	case !st.IsDir():
		return false, status.Errorf(codes.Internal, "%s is not a directory", dir)
	}
	return true, nil
}

// makeDir makes dir complete or not at all: fill populates a fresh
// directory beside it, which is then renamed to dir.
func makeDir(dir string, fill func(tmp string) error) error {
	tmp := filepath.Join(filepath.Dir(dir), ".new-"+filepath.Base(dir))
	if err := os.RemoveAll(tmp); err != nil {
		return status.Errorf(codes.Internal, "removing an earlier attempt at %s: %v", dir, err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return status.Errorf(codes.Internal, "creating the parent of %s: %v", dir, err)
	}
	if err := os.Mkdir(tmp, 0o777); err != nil {
		return status.Errorf(codes.Internal, "creating %s: %v", dir, err)
	}
	// World-writable like an emptyDir, so Pods running as any user can use
	// it; the mode survives the process's umask this way.
	if err := os.Chmod(tmp, 0o777); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	if err := fill(tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		_ = os.RemoveAll(tmp)
		return status.Errorf(codes.Internal, "creating %s: %v", dir, err)
	}
	return nil
}

// errorf is a gRPC status error of code c.
func errorf(c codes.Code, format string, args ...any) error {
	return status.Error(c, fmt.Sprintf(format, args...))
}
