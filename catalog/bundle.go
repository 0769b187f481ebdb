package catalog

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The annotations of a Tekton bundle's layers (Tekton's bundle contract).
const (
	BundleKindAnnotation       = "dev.tekton.image.kind"
	BundleAPIVersionAnnotation = "dev.tekton.image.apiVersion"
	BundleNameAnnotation       = "dev.tekton.image.name"
)

// BundleRepository is where under a registry the bundles go:
// <registry>/tekvirt/bundles/<name>:<version>.
const BundleRepository = "tekvirt/bundles"

// Bundle is obj as a Tekton bundle: an OCI image of one layer, a tar of
// one file named like obj holding it as JSON, annotated with its kind
// (lower case), API version and name.
func Bundle(obj *unstructured.Unstructured) (v1.Image, error) {
	data, err := obj.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: obj.GetName(), Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	content := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(content)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	return mutate.Append(base, mutate.Addendum{Layer: layer, Annotations: map[string]string{
		BundleKindAnnotation:       strings.ToLower(obj.GetKind()),
		BundleAPIVersionAnnotation: obj.GetAPIVersion(),
		BundleNameAnnotation:       obj.GetName(),
	}})
}

// PushBundles pushes every task and pipeline, as published (Render's
// manifests), to <registry>/BundleRepository/<name>:<version>, and returns
// the references by name, with their digests.
func PushBundles(registry string, p Publication, opts ...remote.Option) (map[string]string, error) {
	if err := p.check(); err != nil {
		return nil, fmt.Errorf("publishing the bundles: %w", err)
	}
	ts, err := Tasks()
	if err != nil {
		return nil, err
	}
	ps, err := Pipelines()
	if err != nil {
		return nil, err
	}
	pkgs, err := p.packages(ts, ps)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, pk := range pkgs {
		img, err := Bundle(pk.manifest)
		if err != nil {
			return nil, fmt.Errorf("bundle of %s %s: %w", pk.kind, pk.name, err)
		}
		ref, err := name.ParseReference(registry + "/" + BundleRepository + "/" + pk.name + ":" + p.Version)
		if err != nil {
			return nil, err
		}
		if err := remote.Write(ref, img, opts...); err != nil {
			return nil, fmt.Errorf("pushing the bundle of %s %s to %s: %w", pk.kind, pk.name, ref, err)
		}
		digest, err := img.Digest()
		if err != nil {
			return nil, err
		}
		out[pk.name] = ref.Context().Digest(digest.String()).String()
	}
	return out, nil
}
