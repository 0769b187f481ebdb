package dataimportcron

import (
	"context"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/images"
)

// RegistryDigest reads an image's manifest digest with a HEAD request,
// trusting the template's certConfigMap.
type RegistryDigest struct {
	Client client.Reader
}

// Read returns the digest of the cron's image.
func (d *RegistryDigest) Read(ctx context.Context, c *cdiv1.DataImportCron) (string, error) {
	reg := c.Spec.Template.Spec.Source.Registry
	ref, err := imageRef(*reg.URL)
	if err != nil {
		return "", err
	}
	opts := []remote.Option{remote.WithContext(ctx)}
	if cm := reg.CertConfigMap; cm != nil && *cm != "" {
		tr, err := d.transport(ctx, c.Namespace, *cm)
		if err != nil {
			return "", err
		}
		opts = append(opts, remote.WithTransport(tr))
	}
	desc, err := remote.Head(ref, opts...)
	if err != nil {
		return "", fmt.Errorf("reading the digest of %s: %w", ref, err)
	}
	return desc.Digest.String(), nil
}

func (d *RegistryDigest) transport(ctx context.Context, ns, name string) (http.RoundTripper, error) {
	cm := &corev1.ConfigMap{}
	if err := d.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
		return nil, fmt.Errorf("certificate ConfigMap %s/%s: %w", ns, name, err)
	}
	var pem []byte
	for _, v := range cm.Data {
		pem = append(append(pem, v...), '\n')
	}
	tr, err := images.CATransport(pem)
	if err != nil {
		return nil, fmt.Errorf("certificate ConfigMap %s/%s: %w", ns, name, err)
	}
	return tr, nil
}
