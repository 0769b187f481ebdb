package hostpathcsi

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/tekvirt/tekvirt/contracts/hoststorage"
)

// ParamShared is the StorageClass parameter that asks for shared volumes.
const ParamShared = hoststorage.ParamShared

// volumesMeta is the directory of a root with each volume's record, out of
// the tenant's reach (the volume's own directory is theirs).
const volumesMeta = ".volumes"

// volumeRecord is what the driver keeps of a volume besides its data.
type volumeRecord struct {
	Capacity int64  `json:"capacity"`
	Source   string `json:"source,omitempty"`
}

// ControllerGetCapabilities lists the controller calls served.
func (d *Driver) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, c := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
		csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
	} {
		caps = append(caps, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: c}}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

// CreateVolume makes a volume's directory on this node (or the shared
// root), empty or a copy of a snapshot's or another volume's.
func (d *Driver) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if req.GetName() == "" {
		return nil, errorf(codes.InvalidArgument, "no volume name")
	}
	l, err := d.placeVolume(ctx, req)
	if err != nil {
		return nil, err
	}
	dir, err := d.volumeDir(l)
	if err != nil {
		return nil, err
	}
	release, err := d.claim(dir)
	if err != nil {
		return nil, err
	}
	defer release()
	rec := volumeRecord{Capacity: capacity(req.GetCapacityRange())}
	src, err := d.sourceDir(req.GetVolumeContentSource(), l)
	if err != nil {
		return nil, err
	}
	if src != "" {
		rec.Source = sourceID(req.GetVolumeContentSource())
	}
	if ok, err := exists(dir); err != nil {
		return nil, err
	} else if ok {
		if old, err := readRecord[volumeRecord](d.recordPath(l)); err == nil && *old != rec {
			return nil, errorf(codes.AlreadyExists, "volume %s exists with another size or source (%+v)", l.Name, *old)
		}
		return d.volumeResponse(l, rec, req.GetVolumeContentSource()), nil
	}
	if err := writeRecord(d.recordPath(l), rec); err != nil {
		return nil, err
	}
	err = makeDir(dir, func(tmp string) error {
		if src == "" {
			return nil
		}
		if _, _, err := copyTree(src, tmp); err != nil {
			return errorf(codes.Internal, "%v", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return d.volumeResponse(l, rec, req.GetVolumeContentSource()), nil
}

// placeVolume checks what a new volume asks for and says where it goes:
// on the shared root for a shared class (once the root shows every node),
// else on this node, if the topology and the placement rules let it.
func (d *Driver) placeVolume(ctx context.Context, req *csi.CreateVolumeRequest) (location, error) {
	shared, err := sharedParam(req.GetParameters())
	if err != nil {
		return location{}, err
	}
	if err := checkCapabilities(req.GetVolumeCapabilities(), shared); err != nil {
		return location{}, err
	}
	l := location{Node: d.Node, Name: entryName(req.GetName())}
	if shared {
		l.Node = ""
		if d.CheckShared != nil {
			if err := d.CheckShared(ctx); err != nil {
				return location{}, errorf(codes.FailedPrecondition, "%v", err)
			}
		}
		return l, nil
	}
	if err := d.checkTopology(req.GetAccessibilityRequirements()); err != nil {
		return location{}, err
	}
	if ns, name := req.GetParameters()[paramClaimNamespace], req.GetParameters()[paramClaimName]; d.Placement != nil && name != "" {
		if err := d.Placement(ctx, ns, name); err != nil {
			return location{}, errorf(codes.ResourceExhausted, "%v", err)
		}
	}
	return l, nil
}

// volumeResponse describes the volume at l.
func (d *Driver) volumeResponse(l location, rec volumeRecord, src *csi.VolumeContentSource) *csi.CreateVolumeResponse {
	v := &csi.Volume{VolumeId: l.String(), CapacityBytes: rec.Capacity, ContentSource: src}
	segment := map[string]string{TopologyKey: l.Node}
	if l.Node == "" {
		segment = map[string]string{hoststorage.SharedTopologyKey: "true"}
	}
	v.AccessibleTopology = []*csi.Topology{{Segments: segment}}
	return &csi.CreateVolumeResponse{Volume: v}
}

// The claim's and the volume's names, which the external-provisioner adds
// to the parameters (--extra-create-metadata).
const (
	metadataPrefix      = "csi.storage.k8s.io/"
	paramClaimName      = metadataPrefix + "pvc/name"
	paramClaimNamespace = metadataPrefix + "pvc/namespace"
)

// sharedParam reads the class parameters: only ParamShared is known,
// besides the external-provisioner's metadata.
func sharedParam(params map[string]string) (bool, error) {
	var unknown []string
	for k := range params {
		if k != ParamShared && !strings.HasPrefix(k, metadataPrefix) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return false, errorf(codes.InvalidArgument, "unknown StorageClass parameters %s: %s knows only %q", strings.Join(unknown, ", "), DriverName, ParamShared)
	}
	switch v := params[ParamShared]; v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, errorf(codes.InvalidArgument, "StorageClass parameter %s is %q, not \"true\" or \"false\"", ParamShared, v)
	}
}

// checkCapabilities refuses what the driver cannot give: block volumes,
// and a local volume on several nodes at once.
func checkCapabilities(caps []*csi.VolumeCapability, shared bool) error {
	if len(caps) == 0 {
		return errorf(codes.InvalidArgument, "no volume capabilities")
	}
	for _, c := range caps {
		if c.GetBlock() != nil {
			return errorf(codes.InvalidArgument, "volumeMode Block: %s provides Filesystem volumes only", DriverName)
		}
		if c.GetMount() == nil {
			return errorf(codes.InvalidArgument, "a volume capability without an access type")
		}
		switch c.GetAccessMode().GetMode() {
		case csi.VolumeCapability_AccessMode_UNKNOWN:
			return errorf(codes.InvalidArgument, "a volume capability without an access mode")
		case csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER, csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY, csi.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER:
			if !shared {
				return errorf(codes.InvalidArgument, "ReadWriteMany or ReadOnlyMany (%s): volumes of this class live on one node; use a class with parameter %s: \"true\" (tekvirt-shared)", c.GetAccessMode().GetMode(), ParamShared)
			}
		}
	}
	return nil
}

// checkTopology refuses a local volume on this node when the requisite
// topologies leave it out.
func (d *Driver) checkTopology(req *csi.TopologyRequirement) error {
	if len(req.GetRequisite()) == 0 {
		return nil
	}
	for _, t := range req.GetRequisite() {
		if n, ok := t.GetSegments()[TopologyKey]; ok && n == d.Node {
			return nil
		}
	}
	return errorf(codes.ResourceExhausted, "node %s is not among the volume's requisite topologies %v", d.Node, req.GetRequisite())
}

// capacity is the size to report: what was required, else the limit.
func capacity(r *csi.CapacityRange) int64 {
	if r.GetRequiredBytes() > 0 {
		return r.GetRequiredBytes()
	}
	return r.GetLimitBytes()
}

// sourceID is the ID of the snapshot or volume a volume is made from.
func sourceID(src *csi.VolumeContentSource) string {
	if s := src.GetSnapshot(); s != nil {
		return "snapshot:" + s.GetSnapshotId()
	}
	return "volume:" + src.GetVolume().GetVolumeId()
}

// sourceDir is the directory a new volume at l is copied from, "" when
// it starts empty. The source must be where the volume will be.
func (d *Driver) sourceDir(src *csi.VolumeContentSource, l location) (string, error) {
	var id, kind string
	var dirOf func(location) (string, error)
	switch {
	case src == nil:
		return "", nil
	case src.GetSnapshot() != nil:
		id, kind, dirOf = src.GetSnapshot().GetSnapshotId(), "snapshot", d.snapshotDir
	case src.GetVolume() != nil:
		id, kind, dirOf = src.GetVolume().GetVolumeId(), "volume", d.volumeDir
	default:
		return "", errorf(codes.InvalidArgument, "unknown volume content source")
	}
	from, err := parseLocation(id)
	if err != nil {
		return "", errorf(codes.NotFound, "source %s: %v", kind, err)
	}
	if from.Node != l.Node {
		where := "node " + from.Node
		if from.Node == "" {
			where = "the shared root"
		}
		return "", errorf(codes.ResourceExhausted, "source %s %s is on %s; a volume made from it must be there too", kind, id, where)
	}
	dir, err := dirOf(from)
	if err != nil {
		return "", err
	}
	if ok, err := exists(dir); err != nil {
		return "", err
	} else if !ok {
		return "", errorf(codes.NotFound, "source %s %s does not exist", kind, id)
	}
	return dir, nil
}

// DeleteVolume removes a volume's directory; one that is not there (or an
// ID that is not the driver's) is deleted already.
func (d *Driver) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, errorf(codes.InvalidArgument, "no volume ID")
	}
	l, err := parseLocation(req.GetVolumeId())
	if err != nil {
		return &csi.DeleteVolumeResponse{}, nil
	}
	dir, err := d.volumeDir(l)
	if err != nil {
		return nil, err
	}
	if err := d.remove("volume", l, dir, d.recordPath(l)); err != nil {
		return nil, err
	}
	return &csi.DeleteVolumeResponse{}, nil
}

// ValidateVolumeCapabilities confirms the capabilities a volume can have.
func (d *Driver) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if req.GetVolumeId() == "" || len(req.GetVolumeCapabilities()) == 0 {
		return nil, errorf(codes.InvalidArgument, "a volume ID and volume capabilities are needed")
	}
	l, _, err := d.existingVolume(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if err := checkCapabilities(req.GetVolumeCapabilities(), l.Node == ""); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: err.Error()}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext: req.GetVolumeContext(), VolumeCapabilities: req.GetVolumeCapabilities(), Parameters: req.GetParameters(),
	}}, nil
}

// remove deletes the directory of the volume or snapshot at l and its
// record, once no other call works on it.
func (d *Driver) remove(kind string, l location, dir, record string) error {
	release, err := d.claim(dir)
	if err != nil {
		return err
	}
	defer release()
	if err := os.RemoveAll(dir); err != nil {
		return errorf(codes.Internal, "removing %s %s: %v", kind, l, err)
	}
	if err := os.Remove(record); err != nil && !errors.Is(err, os.ErrNotExist) {
		return errorf(codes.Internal, "removing the record of %s %s: %v", kind, l, err)
	}
	return nil
}

// recordPath is the file of the volume at l's record.
func (d *Driver) recordPath(l location) string {
	r, err := d.root(l)
	if err != nil {
		return ""
	}
	return filepath.Join(r, volumesMeta, l.Name+".json")
}

// readRecord reads a record written by writeRecord.
func readRecord[T any](path string) (*T, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// writeRecord stores v at path, whole or not at all.
func writeRecord(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return errorf(codes.Internal, "%v", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return errorf(codes.Internal, "%v", err)
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return errorf(codes.Internal, "%v", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return errorf(codes.Internal, "%v", err)
	}
	return nil
}
