package images

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	streamlayer "github.com/google/go-containerregistry/pkg/v1/stream"
)

// ContainerDiskPath is where a pushed containerDisk holds its disk, and
// ContainerDiskOwner the user and group owning it, as KubeVirt's
// containerDisk images have them (its qemu user).
const (
	ContainerDiskPath  = "disk/disk.img"
	ContainerDiskOwner = 107
)

// PushOptions tune PushContainerDisk.
type PushOptions struct {
	// Progress, when set, is called at most every Interval with the disk
	// bytes sent (Phase "uploading"), and once at the end (Phase "done").
	Progress func(Progress)
	Interval time.Duration
	// Attempts is how often the push is tried when the network fails
	// (default 3); a refusal by the registry is not retried.
	Attempts int
	// Backoff is the wait before the first retry, doubled after each.
	Backoff time.Duration
}

// PushContainerDisk pushes the disk file at path to reg as a containerDisk
// image for linux on this architecture: one layer holding it at
// ContainerDiskPath. The layer is gzip-compressed as it streams, so a sparse
// disk's holes cost little on the wire and nothing is staged on disk. It
// returns the pushed manifest's digest.
func PushContainerDisk(ctx context.Context, path string, reg *Registry, o PushOptions) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("the disk to push: %w", err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("the disk to push, %s, is not a regular file", path)
	}
	ref, ropts, err := reg.remote(ctx)
	if err != nil {
		return "", err
	}
	var digest string
	err = retry(ctx, max(1, orDefault(o.Attempts, 3)), orDefault(o.Backoff, 2*time.Second), func() (bool, error) {
		var err error
		if digest, err = pushOnce(ref, ropts, path, st.Size(), o); err != nil {
			err = reg.fail("pushing to", "give credentials the registry accepts for this repository", err)
			return !errors.Is(err, ErrUnauthorized) && !errors.Is(err, ErrNotFound) && ctx.Err() == nil, err
		}
		return false, nil
	})
	if err != nil {
		return "", err
	}
	if o.Progress != nil {
		o.Progress(Progress{Done: st.Size(), Total: st.Size(), Phase: "done"})
	}
	return digest, nil
}

// pushOnce streams the disk into a new image and writes it.
func pushOnce(ref name.Reference, ropts []remote.Option, path string, size int64, o PushOptions) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("the disk to push: %w", err)
	}
	defer f.Close()
	in := io.Reader(f)
	if o.Progress != nil {
		in = &progressReader{r: f, total: size, interval: orDefault(o.Interval, 5*time.Second),
			report: func(p Progress) { p.Phase = "uploading"; o.Progress(p) }}
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeDiskTar(pw, in, size)) }()
	defer func() { _ = pr.Close() }()
	base, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{OS: "linux", Architecture: runtime.GOARCH})
	if err != nil {
		return "", err
	}
	img, err := mutate.AppendLayers(base, streamlayer.NewLayer(pr, streamlayer.WithCompressionLevel(gzip.BestSpeed)))
	if err != nil {
		return "", err
	}
	// One try here: a streamed layer cannot be sent again, and go-containerregistry's
	// own retry would only report it consumed; PushContainerDisk starts over instead.
	once := append(ropts[:len(ropts):len(ropts)], remote.WithRetryBackoff(remote.Backoff{Steps: 1}))
	if err := remote.Write(ref, img, once...); err != nil {
		return "", err
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return d.String(), nil
}

// writeDiskTar writes the layer's tar: the disk directory and the disk.
func writeDiskTar(w io.Writer, disk io.Reader, size int64) error {
	tw := tar.NewWriter(w)
	now := time.Unix(0, 0)
	hdrs := []*tar.Header{
		{Typeflag: tar.TypeDir, Name: path.Dir(ContainerDiskPath) + "/", Mode: 0o555, Uid: ContainerDiskOwner, Gid: ContainerDiskOwner, ModTime: now},
		{Typeflag: tar.TypeReg, Name: ContainerDiskPath, Mode: 0o440, Size: size, Uid: ContainerDiskOwner, Gid: ContainerDiskOwner, ModTime: now},
	}
	for _, h := range hdrs {
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
	}
	if n, err := io.Copy(tw, disk); err != nil {
		return err
	} else if n != size {
		return fmt.Errorf("the disk changed while it was pushed: %d bytes read, %d expected", n, size)
	}
	return tw.Close()
}
