package importdisk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tekvirt/tekvirt/contracts/datastep"
	"github.com/tekvirt/tekvirt/images"
	"github.com/tekvirt/tekvirt/tasks/credentials"
	"github.com/tekvirt/tekvirt/tasks/result"
)

// DiskFile is the disk's name on the volume, as in CDI.
const DiskFile = "disk.img"

// Params are the task's params.
type Params struct {
	URL, Registry string
	// SecretName holds accessKeyId/secretKey (CDI's format): basic auth
	// for URL, username/password for Registry.
	SecretName string
	// CertConfigMap holds extra CA certificates (any key, PEM); CertDir is
	// the same mounted as files.
	CertConfigMap, CertDir string
	// Blank makes an empty disk of Size instead of importing.
	Blank bool
	// DigestOnly reads the Registry image's manifest digest and imports
	// nothing (a DataImportCron's poll).
	DigestOnly bool
	Checksum   string
	// Size is the virtual size wanted; Capacity what the volume holds.
	Size, Capacity string
	// InsecureRegistry allows plain HTTP or unverified TLS to Registry.
	InsecureRegistry bool
	// ContainerDiskDir, when set, imports the disk of the containerDisk
	// image the step runs in (CDI's pullMethod node: the node's runtime
	// pulled it): the first regular file under this directory (/disk).
	ContainerDiskDir string
	// Dir is the data workspace's path; Namespace where secrets are read.
	Dir, Namespace string
	// ProgressAddr, when set, serves GET /progress there during the import.
	ProgressAddr string
	// UploadAddr, when set, receives the image as an upload there instead
	// (with GET /progress), authorized by tokens for PVC UploadClaim signed
	// with the key whose public half is UploadPublicKey (base64).
	UploadAddr, UploadPublicKey, UploadClaim, UploadClaimUID string
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
	if p.ContainerDiskDir != "" {
		if p.URL != "" || p.Registry != "" {
			return nil, errors.New("give one of params url and registry, or a container disk directory")
		}
		return ContainerDisk(p.ContainerDiskDir)
	}
	if (p.URL == "") == (p.Registry == "") {
		return nil, errors.New("give exactly one of params url and registry")
	}
	user, pass, err := basicAuth(ctx, c, p)
	if err != nil {
		return nil, err
	}
	ca, err := caBundle(ctx, c, p)
	if err != nil {
		return nil, err
	}
	if p.Registry != "" {
		s := &images.RegistrySource{Registry: images.Registry{Ref: strings.TrimPrefix(p.Registry, "docker://"), Insecure: p.InsecureRegistry, CA: ca}}
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
	s.CA = ca
	return s, nil
}

// ContainerDisk is the disk of a containerDisk image whose files the step
// sees at their place: the first regular file (by name) under dir, as CDI
// and KubeVirt pick it.
func ContainerDisk(dir string) (images.Source, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("the containerDisk image has no %s directory: %w", dir, err)
	}
	for _, e := range entries {
		if e.Type().IsRegular() {
			return images.FileSource{Path: filepath.Join(dir, e.Name())}, nil
		}
	}
	return nil, fmt.Errorf("the containerDisk image has no file under %s", dir)
}

// Digest reads the manifest digest of a registry source.
func Digest(ctx context.Context, src images.Source) (string, error) {
	reg, ok := src.(*images.RegistrySource)
	if !ok {
		return "", &result.Failure{Err: errors.New("only a registry image has a digest to read: give param registry")}
	}
	d, err := reg.Head(ctx)
	if err != nil {
		return "", &result.Failure{Err: err}
	}
	return d, nil
}

func basicAuth(ctx context.Context, c client.Client, p Params) (string, string, error) {
	if p.SecretName == "" {
		return os.Getenv(datastep.AccessKeyEnv), os.Getenv(datastep.SecretKeyEnv), nil
	}
	return credentials.Basic(ctx, c, p.Namespace, p.SecretName)
}

func caBundle(ctx context.Context, c client.Client, p Params) ([]byte, error) {
	if p.CertDir != "" {
		return readCerts(p.CertDir)
	}
	if p.CertConfigMap == "" {
		return nil, nil
	}
	return credentials.CABundle(ctx, c, p.Namespace, p.CertConfigMap)
}

// readCerts concatenates the files of a mounted certificate ConfigMap.
func readCerts(dir string) ([]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("certificate directory: %w", err)
	}
	var pem []byte
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		pem = append(append(pem, b...), '\n')
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
	prog := newProgress(out)
	if p.ProgressAddr != "" {
		stop, err := prog.serve(p.ProgressAddr)
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	return run(ctx, src, p, prog)
}

func run(ctx context.Context, src images.Source, p Params, prog *progress) (*Result, error) {
	out := prog.out
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
		return nil, &result.Failure{Err: err}
	}
	defer rc.Close()
	start := time.Now()
	fmt.Fprintf(out, "importing %s (%s) into %s\n", src, bytesText(total), filepath.Join(p.Dir, DiskFile))
	res, err := images.Import(ctx, rc, total, images.Target{Path: filepath.Join(p.Dir, DiskFile), Size: size, Capacity: capacity}, images.Options{
		Checksum: p.Checksum, ProgressInterval: 500 * time.Millisecond, Progress: prog.update,
	})
	if err != nil {
		return nil, &result.Failure{Err: fmt.Errorf("importing %s: %w", src, err)}
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

// Blank writes an empty sparse disk.img of p.Size, replacing nothing that
// exists (a rerun finds the disk and keeps it).
func Blank(p Params, out io.Writer) (*Result, error) {
	size, err := quantity("size", p.Size)
	if err != nil || size <= 0 {
		return nil, fmt.Errorf("a blank disk needs param size: %w", err)
	}
	path := filepath.Join(p.Dir, DiskFile)
	if st, err := os.Stat(path); err == nil {
		fmt.Fprintf(out, "%s exists (%d bytes); kept\n", path, st.Size())
		return &Result{Result: &images.Result{Format: images.Raw, VirtualSize: st.Size(), DiskSize: st.Size()}}, nil
	}
	f, err := os.Create(path + ".importing")
	if err != nil {
		return nil, err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	if err := os.Rename(path+".importing", path); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "blank disk of %d bytes at %s\n", size, path)
	return &Result{Result: &images.Result{Format: images.Raw, VirtualSize: size, DiskSize: size}}, nil
}
