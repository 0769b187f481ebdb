package hostpathcsi

import (
	"context"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// snapshotRecord is what the driver keeps of a snapshot besides its data.
type snapshotRecord struct {
	Source  string    `json:"source"`
	Created time.Time `json:"created"`
	Size    int64     `json:"size"`
	// Method is how the files were copied: images.CloneReflink or
	// images.CloneSparse.
	Method string `json:"method"`
}

// CreateSnapshot copies a volume's tree beside it, under .snapshots of the
// same root: on the volume's node, sharing blocks where the file system
// can. Asked again for the same name and source, it answers the same.
func (d *Driver) CreateSnapshot(ctx context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	if req.GetName() == "" {
		return nil, errorf(codes.InvalidArgument, "no snapshot name")
	}
	if req.GetSourceVolumeId() == "" {
		return nil, errorf(codes.InvalidArgument, "no source volume ID")
	}
	if len(req.GetParameters()) > 0 {
		return nil, errorf(codes.InvalidArgument, "VolumeSnapshotClass parameters %v: %s takes none", req.GetParameters(), DriverName)
	}
	src, from, err := d.existingVolume(req.GetSourceVolumeId())
	if err != nil {
		return nil, err
	}
	l := location{Node: src.Node, Name: entryName(req.GetName())}
	dir, err := d.snapshotDir(l)
	if err != nil {
		return nil, err
	}
	release, err := d.claim(dir)
	if err != nil {
		return nil, err
	}
	defer release()
	if rec, err := readRecord[snapshotRecord](dir + ".json"); err == nil {
		if rec.Source != src.String() {
			return nil, errorf(codes.AlreadyExists, "snapshot %s exists, of volume %s", l.Name, rec.Source)
		}
		if ok, err := exists(dir); err != nil {
			return nil, err
		} else if ok {
			return snapshotResponse(l, rec), nil
		}
	}
	rec := &snapshotRecord{Source: src.String(), Created: time.Now().UTC().Truncate(time.Second)}
	err = makeDir(dir, func(tmp string) error {
		rec.Method, rec.Size, err = copyTree(from, tmp)
		if err != nil {
			return errorf(codes.Internal, "%v", err)
		}
		return writeRecord(dir+".json", rec)
	})
	if err != nil {
		return nil, err
	}
	return snapshotResponse(l, rec), nil
}

// snapshotResponse describes the snapshot at l.
func snapshotResponse(l location, rec *snapshotRecord) *csi.CreateSnapshotResponse {
	return &csi.CreateSnapshotResponse{Snapshot: &csi.Snapshot{
		SnapshotId: l.String(), SourceVolumeId: rec.Source, SizeBytes: rec.Size,
		CreationTime: timestamppb.New(rec.Created), ReadyToUse: true,
	}}
}

// DeleteSnapshot removes a snapshot's copy; one that is not there (or an
// ID that is not the driver's) is deleted already.
func (d *Driver) DeleteSnapshot(_ context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	if req.GetSnapshotId() == "" {
		return nil, errorf(codes.InvalidArgument, "no snapshot ID")
	}
	l, err := parseLocation(req.GetSnapshotId())
	if err != nil {
		return &csi.DeleteSnapshotResponse{}, nil
	}
	dir, err := d.snapshotDir(l)
	if err != nil {
		return nil, err
	}
	if err := d.remove("snapshot", l, dir, dir+".json"); err != nil {
		return nil, err
	}
	return &csi.DeleteSnapshotResponse{}, nil
}
