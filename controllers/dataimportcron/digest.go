package dataimportcron

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/images"
	importdisk "github.com/tekvirt/tekvirt/tasks/import-disk"
)

// RegistryDigest reads an image's manifest digest with a HEAD request,
// trusting the template's certConfigMap and logging in with its secretRef
// (keys accessKeyId and secretKey, as CDI's).
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
	if secret := reg.SecretRef; secret != nil && *secret != "" {
		user, pass, err := importdisk.SecretCredentials(ctx, d.Client, c.Namespace, *secret)
		if err != nil {
			return "", fmt.Errorf("registry login of %s: %w", ref, err)
		}
		opts = append(opts, remote.WithAuth(&authn.Basic{Username: user, Password: pass}))
	}
	desc, err := remote.Head(ref, opts...)
	var terr *transport.Error
	if errors.As(err, &terr) && terr.StatusCode == http.StatusUnauthorized {
		return "", fmt.Errorf("reading the digest of %s: the registry wants credentials it accepts (401): "+
			"set spec.template.spec.source.registry.secretRef to a Secret with %s and %s: %w", ref, importdisk.AccessKeyIDKey, importdisk.SecretKeyKey, err)
	}
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
