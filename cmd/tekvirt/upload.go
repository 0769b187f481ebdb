package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	uploadv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/upload/v1beta1"

	"github.com/tekvirt/tekvirt/contracts/upload"
	"github.com/tekvirt/tekvirt/controllers/conditions"
	ctrlconfig "github.com/tekvirt/tekvirt/controllers/config"
	"github.com/tekvirt/tekvirt/images"
	"github.com/tekvirt/tekvirt/tasks/kube"
)

type uploadFlags struct {
	ns, size, imagePath, storageClass, proxyURL string
	noCreate, insecure, async                   bool
	timeout                                     time.Duration
}

// imageUploadCmd is `tekvirt image-upload dv NAME`, virtctl's image-upload:
// it creates a DataVolume with an upload source, waits for UploadReady,
// asks the upload API for a token and sends the file through the proxy.
func imageUploadCmd(g *globalFlags) *cobra.Command {
	var f uploadFlags
	cmd := &cobra.Command{
		Use:     "image-upload dv NAME --image-path FILE --size SIZE",
		Short:   "Upload a local disk image into a new DataVolume",
		Example: "  tekvirt image-upload dv my-disk --size=1Gi --image-path=disk.qcow2.xz",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] != "dv" {
				return fmt.Errorf("image-upload %s: only dv is supported (uploads go into a DataVolume)", args[0])
			}
			return g.imageUpload(cmd.Context(), args[1], f, cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	namespaceFlag(fl, &f.ns, "namespace of the DataVolume")
	fl.StringVar(&f.size, "size", "", "size of the DataVolume's PVC, e.g. 10Gi (required unless --no-create)")
	fl.StringVar(&f.imagePath, "image-path", "", "local disk image (raw, qcow2, vmdk, ... optionally gz/xz/zst compressed)")
	fl.StringVar(&f.storageClass, "storage-class", "", "StorageClass of the PVC (default: the cluster's default)")
	fl.StringVar(&f.proxyURL, "uploadproxy-url", "", "URL of the upload proxy (default: its Service's cluster IP)")
	fl.BoolVar(&f.noCreate, "no-create", false, "upload into an existing DataVolume")
	fl.BoolVar(&f.insecure, "insecure", false, "do not verify the upload proxy's certificate")
	fl.BoolVar(&f.async, "async", false, "return once the data is sent, without waiting for the disk to be written")
	fl.DurationVar(&f.timeout, "wait-secs", 5*time.Minute, "how long to wait for the DataVolume to be ready for the upload")
	_ = cmd.MarkFlagRequired("image-path")
	return cmd
}

func (g *globalFlags) imageUpload(ctx context.Context, name string, f uploadFlags, log io.Writer) error {
	c, _, err := g.kubeClient()
	if err != nil {
		return err
	}
	file, err := os.Open(f.imagePath)
	if err != nil {
		return err
	}
	defer func() { _ = file.Close() }()
	st, err := file.Stat()
	if err != nil {
		return err
	}
	if !f.noCreate {
		if err := createUploadDV(ctx, c, name, f); err != nil {
			return err
		}
		fmt.Fprintf(log, "DataVolume %s/%s created\n", f.ns, name)
	}
	if err := waitDV(ctx, c, f.ns, name, f.timeout, cdiv1.UploadReady); err != nil {
		return err
	}
	fmt.Fprintf(log, "DataVolume %s/%s is UploadReady\n", f.ns, name)
	tr := &uploadv1beta1.UploadTokenRequest{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "token-for-" + name},
		Spec: uploadv1beta1.UploadTokenRequestSpec{PvcName: name}}
	if err := c.Create(ctx, tr); err != nil {
		return fmt.Errorf("requesting an upload token: %w", err)
	}
	proxy, err := proxyClient(ctx, c, f)
	if err != nil {
		return err
	}
	bar := newProgressBar(log, st.Size())
	err = proxy.Upload(ctx, tr.Status.Token, io.TeeReader(file, bar), st.Size(), f.async)
	bar.finish()
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "uploaded %s\n", f.imagePath)
	if f.async {
		return nil
	}
	if err := waitDV(ctx, c, f.ns, name, time.Minute, cdiv1.Succeeded); err != nil {
		return err
	}
	fmt.Fprintf(log, "DataVolume %s/%s Succeeded\n", f.ns, name)
	return nil
}

func createUploadDV(ctx context.Context, c client.Client, name string, f uploadFlags) error {
	if f.size == "" {
		return fmt.Errorf("--size is required to create the DataVolume")
	}
	size, err := resource.ParseQuantity(f.size)
	if err != nil {
		return fmt.Errorf("--size %q: %w", f.size, err)
	}
	dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Upload: &cdiv1.DataVolumeSourceUpload{}},
			Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}}}}}
	if f.storageClass != "" {
		dv.Spec.Storage.StorageClassName = &f.storageClass
	}
	if err := c.Create(ctx, dv); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("DataVolume %s/%s exists: use --no-create to upload into it", f.ns, name)
		}
		return fmt.Errorf("creating DataVolume %s/%s: %w", f.ns, name, err)
	}
	return nil
}

// waitDV waits for the DataVolume to reach phase, failing early if it fails.
func waitDV(ctx context.Context, c client.Client, ns, name string, timeout time.Duration, phase cdiv1.DataVolumePhase) error {
	dv := &cdiv1.DataVolume{}
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, dv); err != nil {
			return false, err
		}
		if dv.Status.Phase == cdiv1.Failed {
			return false, fmt.Errorf("DataVolume %s/%s Failed: %s", ns, name, conditions.ReadyMessage(dv))
		}
		return dv.Status.Phase == phase, nil
	})
	if wait.Interrupted(err) {
		return fmt.Errorf("DataVolume %s/%s is %q after %s, not %s: %s", ns, name, dv.Status.Phase, timeout, phase, conditions.ReadyMessage(dv))
	}
	return err
}

// proxyClient reaches the upload proxy at --uploadproxy-url or else at its
// Service's cluster IP, verifying its certificate (for the Service's DNS
// name) with tekvirt's CA bundle, which the operator publishes.
func proxyClient(ctx context.Context, c client.Client, f uploadFlags) (*upload.Client, error) {
	tr := &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}}
	if !f.insecure {
		caPEM, err := kube.TekvirtCA(ctx, c)
		if err != nil {
			return nil, err
		}
		if tr, err = images.CATransport(caPEM); err != nil {
			return nil, fmt.Errorf("tekvirt's CA bundle: %w", err)
		}
		tr.Proxy = http.ProxyFromEnvironment
	}
	tlsCfg := tr.TLSClientConfig
	tlsCfg.InsecureSkipVerify = f.insecure //nolint:gosec // only with --insecure
	url := f.proxyURL
	if url == "" {
		svc := &corev1.Service{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ctrlconfig.Namespace, Name: ctrlconfig.UploadProxyService}, svc); err != nil {
			return nil, fmt.Errorf("finding the upload proxy (or give --uploadproxy-url): %w", err)
		}
		url = "https://" + net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port)))
		tlsCfg.ServerName = ctrlconfig.UploadProxyService + "." + ctrlconfig.Namespace + ".svc"
	}
	return &upload.Client{URL: url, HTTP: &http.Client{Transport: tr}}, nil
}

// progressBar draws the upload's progress on one line.
type progressBar struct {
	out         io.Writer
	total, done int64
	start, last time.Time
}

func newProgressBar(out io.Writer, total int64) *progressBar {
	return &progressBar{out: out, total: total, start: time.Now()}
}

func (p *progressBar) Write(b []byte) (int, error) {
	p.done += int64(len(b))
	if time.Since(p.last) >= 200*time.Millisecond {
		p.last = time.Now()
		p.draw()
	}
	return len(b), nil
}

func (p *progressBar) draw() {
	const width = 30
	frac := 1.0
	if p.total > 0 {
		frac = float64(p.done) / float64(p.total)
	}
	n := int(frac * width)
	rate := float64(p.done) / max(time.Since(p.start).Seconds(), 0.001) / (1 << 20)
	fmt.Fprintf(p.out, "\r[%-*s] %5.1f%% %d/%d MiB %.1f MiB/s", width, strings.Repeat("=", n), frac*100, p.done>>20, p.total>>20, rate)
}

func (p *progressBar) finish() {
	p.draw()
	fmt.Fprintln(p.out)
}
