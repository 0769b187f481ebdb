package images

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// RegistrySource reads the disk of a containerDisk image: the first regular
// file under /disk/, as KubeVirt and CDI lay them out.
type RegistrySource struct {
	Ref string
	// Auth for the registry; anonymous when nil.
	Auth authn.Authenticator
	// Insecure allows plain HTTP and unverified TLS for this registry.
	Insecure bool
	// CA holds extra PEM certificates to trust for the registry's TLS.
	CA []byte
	// Digest is set by Open to the manifest digest it read.
	Digest string
}

func (s *RegistrySource) String() string { return s.Ref }

// Open implements Source. The layers stream through; nothing is staged.
func (s *RegistrySource) Open(ctx context.Context) (io.ReadCloser, int64, error) {
	var opts []name.Option
	if s.Insecure {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.ParseReference(s.Ref, opts...)
	if err != nil {
		return nil, 0, fmt.Errorf("image reference %q: %w", s.Ref, err)
	}
	auth := s.Auth
	if auth == nil {
		auth = authn.Anonymous
	}
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithAuth(auth)}
	if len(s.CA) > 0 {
		tr, err := CATransport(s.CA)
		if err != nil {
			return nil, 0, err
		}
		ropts = append(ropts, remote.WithTransport(tr))
	}
	img, err := remote.Image(ref, ropts...)
	if err != nil {
		var terr *transport.Error
		if errors.As(err, &terr) && terr.StatusCode == 404 {
			return nil, 0, fmt.Errorf("%w: image %s: %w", ErrNotFound, s.Ref, err)
		}
		return nil, 0, fmt.Errorf("pulling %s: %w", s.Ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return nil, 0, fmt.Errorf("pulling %s: %w", s.Ref, err)
	}
	s.Digest = d.String()
	rc := mutate.Extract(img)
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			rc.Close()
			return nil, 0, fmt.Errorf("%w: image %s has no disk file under /disk/", ErrNotFound, s.Ref)
		}
		if err != nil {
			rc.Close()
			return nil, 0, fmt.Errorf("reading image %s: %w", s.Ref, err)
		}
		p := path.Clean("/" + h.Name)
		if h.Typeflag == tar.TypeReg && strings.HasPrefix(p, "/disk/") {
			return readCloser{Reader: tr, Closer: rc}, h.Size, nil
		}
	}
}

type readCloser struct {
	io.Reader
	io.Closer
}
