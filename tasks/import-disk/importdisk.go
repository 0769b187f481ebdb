package importdisk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tekvirt/tekvirt/images"
)

// DiskFile is the disk's name on the volume, as in CDI.
const DiskFile = "disk.img"

// Params are the task's params.
type Params struct {
	URL, Registry string
	// SecretName holds accessKeyId/secretKey (CDI's format): basic auth
	// for URL, username/password for Registry.
	SecretName string
	// CertConfigMap holds extra CA certificates (any key, PEM).
	CertConfigMap string
	Checksum      string
	// Size is the virtual size wanted; Capacity what the volume holds.
	Size, Capacity string
	// InsecureRegistry allows plain HTTP or unverified TLS to Registry.
	InsecureRegistry bool
	// Dir is the data workspace's path; Namespace where secrets are read.
	Dir, Namespace string
}

// Result is what the task reports.
type Result struct {
	*images.Result
	Digest string
}

// Map is the task's results.
func (r Result) Map() map[string]string {
	return map[string]string{
		"format": string(r.Format), "virtualSize": fmt.Sprint(r.VirtualSize),
		"diskSize": fmt.Sprint(r.DiskSize), "digest": r.Digest,
	}
}

// Source builds the image source the params name.
func Source(ctx context.Context, c client.Client, p Params) (images.Source, error) {
	if (p.URL == "") == (p.Registry == "") {
		return nil, errors.New("give exactly one of params url and registry")
	}
	user, pass, err := credentials(ctx, c, p)
	if err != nil {
		return nil, err
	}
	if p.Registry != "" {
		s := &images.RegistrySource{Ref: strings.TrimPrefix(p.Registry, "docker://"), Insecure: p.InsecureRegistry}
		if user != "" {
			s.Auth = &authn.Basic{Username: user, Password: pass}
		}
		return s, nil
	}
	s := &images.HTTPSource{URL: p.URL, Header: http.Header{}}
	if user != "" {
		req, _ := http.NewRequest(http.MethodGet, p.URL, nil)
		req.SetBasicAuth(user, pass)
		s.Header = req.Header
	}
	if s.CA, err = caBundle(ctx, c, p); err != nil {
		return nil, err
	}
	return s, nil
}

func credentials(ctx context.Context, c client.Client, p Params) (string, string, error) {
	if p.SecretName == "" {
		return "", "", nil
	}
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.SecretName}, s); err != nil {
		return "", "", fmt.Errorf("credentials secret %s/%s: %w", p.Namespace, p.SecretName, err)
	}
	user, pass := string(s.Data["accessKeyId"]), string(s.Data["secretKey"])
	if user == "" || pass == "" {
		return "", "", fmt.Errorf("credentials secret %s/%s needs accessKeyId and secretKey", p.Namespace, p.SecretName)
	}
	return user, pass, nil
}

func caBundle(ctx context.Context, c client.Client, p Params) ([]byte, error) {
	if p.CertConfigMap == "" {
		return nil, nil
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.CertConfigMap}, cm); err != nil {
		return nil, fmt.Errorf("certificate ConfigMap %s/%s: %w", p.Namespace, p.CertConfigMap, err)
	}
	var pem []byte
	for _, v := range cm.Data {
		pem = append(pem, v...)
		pem = append(pem, '\n')
	}
	return pem, nil
}

func quantity(param, v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return 0, fmt.Errorf("param %s %q is not a quantity like 10Gi: %w", param, v, err)
	}
	return q.Value(), nil
}

// Run imports src into p.Dir/disk.img, printing progress to out.
func Run(ctx context.Context, src images.Source, p Params, out io.Writer) (*Result, error) {
	size, err := quantity("size", p.Size)
	if err != nil {
		return nil, err
	}
	capacity, err := quantity("capacity", p.Capacity)
	if err != nil {
		return nil, err
	}
	rc, total, err := src.Open(ctx)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	start := time.Now()
	fmt.Fprintf(out, "importing %s (%s) into %s\n", src, bytesText(total), filepath.Join(p.Dir, DiskFile))
	res, err := images.Import(ctx, rc, total, images.Target{Path: filepath.Join(p.Dir, DiskFile), Size: size, Capacity: capacity}, images.Options{
		Checksum: p.Checksum, ProgressInterval: 2 * time.Second,
		Progress: func(pr images.Progress) {
			if pr.Percent() >= 0 {
				fmt.Fprintf(out, "progress: %.2f%% (%d of %d bytes)\n", pr.Percent(), pr.Done, pr.Total)
			} else {
				fmt.Fprintf(out, "progress: %d bytes\n", pr.Done)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("importing %s: %w", src, err)
	}
	r := &Result{Result: res}
	if rs, ok := src.(*images.RegistrySource); ok {
		r.Digest = rs.Digest
	}
	fmt.Fprintf(out, "imported %s image (%s) in %s: virtual size %d bytes, disk %d bytes\n",
		res.Format, compression(res.Compression), time.Since(start).Round(time.Millisecond), res.VirtualSize, res.DiskSize)
	return r, nil
}

func bytesText(n int64) string {
	if n < 0 {
		return "size unknown"
	}
	return fmt.Sprintf("%d bytes", n)
}

func compression(fs []images.Format) string {
	if len(fs) == 0 {
		return "uncompressed"
	}
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = string(f)
	}
	return strings.Join(s, "+")
}
