package images

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Registry is an image reference and how to reach its registry.
type Registry struct {
	Ref string
	// Auth for the registry; anonymous when nil.
	Auth authn.Authenticator
	// Insecure allows plain HTTP and unverified TLS for this registry.
	Insecure bool
	// CA holds extra PEM certificates to trust for the registry's TLS.
	CA []byte
}

// RegistrySource reads the disk of a containerDisk image: the first regular
// file under /disk/, as KubeVirt and CDI lay them out.
type RegistrySource struct {
	Registry
	// Digest is set by Open to the manifest digest it read.
	Digest string
}

// sourceAuthHint is what a reader the registry refuses should do.
const sourceAuthHint = "give a secretRef to a Secret with accessKeyId and secretKey"

func (s *RegistrySource) String() string { return s.Ref }

// Open implements Source. The layers stream through; nothing is staged.
func (s *RegistrySource) Open(ctx context.Context) (io.ReadCloser, int64, error) {
	ref, ropts, err := s.remote(ctx)
	if err != nil {
		return nil, 0, err
	}
	img, err := remote.Image(ref, ropts...)
	if err != nil {
		return nil, 0, s.fail("pulling", sourceAuthHint, err)
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

// Head reads the image's manifest digest without pulling it.
func (s *RegistrySource) Head(ctx context.Context) (string, error) {
	ref, ropts, err := s.remote(ctx)
	if err != nil {
		return "", err
	}
	desc, err := remote.Head(ref, ropts...)
	if err != nil {
		return "", s.fail("reading the digest of", sourceAuthHint, err)
	}
	return desc.Digest.String(), nil
}

// remote is the parsed reference and the options to reach it with.
func (s *Registry) remote(ctx context.Context) (name.Reference, []remote.Option, error) {
	var opts []name.Option
	if s.Insecure {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.ParseReference(s.Ref, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("image reference %q: %w", s.Ref, err)
	}
	auth := s.Auth
	if auth == nil {
		auth = authn.Anonymous
	}
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithAuth(auth)}
	if len(s.CA) > 0 {
		tr, err := CATransport(s.CA)
		if err != nil {
			return nil, nil, err
		}
		ropts = append(ropts, remote.WithTransport(tr))
	}
	return ref, ropts, nil
}

// fail names what went wrong talking to the registry: a missing image, or
// credentials it does not accept (hint: what to do about them).
func (s *Registry) fail(doing, hint string, err error) error {
	var terr *transport.Error
	if errors.As(err, &terr) {
		switch terr.StatusCode {
		case http.StatusNotFound:
			return fmt.Errorf("%w: image %s: %w", ErrNotFound, s.Ref, err)
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("%w: %s %s: the registry wants credentials it accepts (%d); %s: %w", ErrUnauthorized, doing, s.Ref, terr.StatusCode, hint, err)
		}
	}
	return fmt.Errorf("%s %s: %w", doing, s.Ref, err)
}

type readCloser struct {
	io.Reader
	io.Closer
}
