package hostpathcsi

import (
	"context"
	"path/filepath"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/tekvirt/tekvirt/contracts/hoststorage"
	"github.com/tekvirt/tekvirt/runtime/podvolume"
)

// NodeGetInfo names this node and its topology: the node itself, and
// whether it has the shared root.
func (d *Driver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	segments := map[string]string{TopologyKey: d.Node}
	if d.SharedRoot != "" {
		segments[hoststorage.SharedTopologyKey] = "true"
	}
	return &csi.NodeGetInfoResponse{NodeId: d.Node, AccessibleTopology: &csi.Topology{Segments: segments}}, nil
}

// NodeGetCapabilities lists the node calls served beyond publishing.
func (d *Driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{
		{Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: csi.NodeServiceCapability_RPC_GET_VOLUME_STATS}}},
	}}, nil
}

// NodePublishVolume bind-mounts a volume's directory at the target path
// the kubelet gives (nosuid, nodev; read-only when asked).
func (d *Driver) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	switch {
	case req.GetVolumeId() == "":
		return nil, errorf(codes.InvalidArgument, "no volume ID")
	case req.GetTargetPath() == "" || !filepath.IsAbs(req.GetTargetPath()):
		return nil, errorf(codes.InvalidArgument, "target path %q is not absolute", req.GetTargetPath())
	case req.GetVolumeCapability() == nil:
		return nil, errorf(codes.InvalidArgument, "no volume capability")
	}
	l, dir, err := d.existingVolume(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if err := checkCapabilities([]*csi.VolumeCapability{req.GetVolumeCapability()}, l.Node == ""); err != nil {
		return nil, err
	}
	target := filepath.Clean(req.GetTargetPath())
	parent := podvolume.Dir{Path: filepath.Dir(target)}
	if err := parent.Mount(dir, filepath.Base(target), req.GetReadonly()); err != nil {
		return nil, errorf(codes.Internal, "publishing volume %s at %s: %v", l, target, err)
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

// NodeUnpublishVolume unmounts a volume from the target path and removes
// the mount point; a path with nothing mounted is unpublished already.
func (d *Driver) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if req.GetVolumeId() == "" || req.GetTargetPath() == "" {
		return nil, errorf(codes.InvalidArgument, "a volume ID and a target path are needed")
	}
	target := filepath.Clean(req.GetTargetPath())
	if err := (podvolume.Dir{Path: filepath.Dir(target)}).Unmount(filepath.Base(target)); err != nil {
		return nil, errorf(codes.Internal, "unpublishing volume %s from %s: %v", req.GetVolumeId(), target, err)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// NodeGetVolumeStats reports the file system a published volume is on,
// for the kubelet's volume metrics.
func (d *Driver) NodeGetVolumeStats(_ context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	if req.GetVolumeId() == "" || req.GetVolumePath() == "" {
		return nil, errorf(codes.InvalidArgument, "a volume ID and a volume path are needed")
	}
	if _, err := parseLocation(req.GetVolumeId()); err != nil {
		return nil, errorf(codes.NotFound, "%v", err)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(req.GetVolumePath(), &fs); err != nil {
		return nil, errorf(codes.NotFound, "volume path %s: %v", req.GetVolumePath(), err)
	}
	bs := int64(fs.Bsize)
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{Unit: csi.VolumeUsage_BYTES, Total: int64(fs.Blocks) * bs, Available: int64(fs.Bavail) * bs, Used: int64(fs.Blocks-fs.Bfree) * bs},
		{Unit: csi.VolumeUsage_INODES, Total: int64(fs.Files), Available: int64(fs.Ffree), Used: int64(fs.Files - fs.Ffree)},
	}}, nil
}
