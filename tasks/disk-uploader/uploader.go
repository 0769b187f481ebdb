package diskuploader

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	v1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tekvirt/tekvirt/images"
	"github.com/tekvirt/tekvirt/tasks/credentials"
	"github.com/tekvirt/tekvirt/tasks/result"
)

// DiskFile is the disk's name on a claim, as CDI and import-disk write it.
const DiskFile = "disk.img"

// Source kinds, as EXPORT_SOURCE_KIND takes them.
const (
	KindVM  = "vm"
	KindPVC = "pvc"
)

// Params are the task's params.
type Params struct {
	// Kind and Name are what is exported: a VM or a PVC.
	Kind, Name string
	// Volume is the claim holding the disk (for a VM, one of its volumes'
	// claims), mounted at Dir.
	Volume, Dir string
	// Destination is the image reference pushed to.
	Destination string
	// PushTimeout is in minutes, as upstream's PUSH_TIMEOUT.
	PushTimeout string
	// SecretName holds accessKeyId/secretKey for the registry (none: anonymous);
	// CertConfigMap extra CA certificates.
	SecretName, CertConfigMap string
	Namespace                 string
}

// Result is what the task reports.
type Result struct {
	Digest string
}

// Map is the task's results.
func (r Result) Map() map[string]string { return map[string]string{"digest": r.Digest} }

// Run checks the source and pushes its disk, logging progress to out.
func Run(ctx context.Context, c client.Reader, p Params, out io.Writer) (*Result, error) {
	timeout, err := p.check()
	if err != nil {
		return nil, &result.Failure{Err: err}
	}
	if err := sourceIdle(ctx, c, p); err != nil {
		return nil, &result.Failure{Err: err}
	}
	disk := filepath.Join(p.Dir, DiskFile)
	st, err := os.Stat(disk)
	if err != nil {
		return nil, &result.Failure{Err: fmt.Errorf("claim %s/%s holds no %s to push (a disk CDI or import-disk wrote): %w", p.Namespace, p.Volume, DiskFile, err)}
	}
	reg, err := p.registry(ctx, c)
	if err != nil {
		return nil, &result.Failure{Err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	fmt.Fprintf(out, "pushing %s of %s %s/%s (claim %s, %s) to %s\n", DiskFile, p.Kind, p.Namespace, p.Name, p.Volume, bytesText(st.Size()), p.Destination)
	start := time.Now()
	digest, err := images.PushContainerDisk(ctx, disk, reg, images.PushOptions{Progress: func(pr images.Progress) {
		fmt.Fprintf(out, "%s: %.1f%% (%s of %s)\n", pr.Phase, pr.Percent(), bytesText(pr.Done), bytesText(pr.Total))
	}})
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("the push did not finish within PUSH_TIMEOUT (%s minutes): %w", p.PushTimeout, err)
	}
	if err != nil {
		return nil, &result.Failure{Err: err}
	}
	fmt.Fprintf(out, "pushed %s@%s in %s\n", p.Destination, digest, time.Since(start).Round(time.Millisecond))
	return &Result{Digest: digest}, nil
}

// check validates the params that need no API, naming the one at fault,
// and returns the push timeout.
func (p *Params) check() (time.Duration, error) {
	p.Kind = strings.ToLower(p.Kind)
	if p.Kind != KindVM && p.Kind != KindPVC {
		return 0, fmt.Errorf("EXPORT_SOURCE_KIND %q is not %s or %s", p.Kind, KindVM, KindPVC)
	}
	for param, v := range map[string]string{"EXPORT_SOURCE_NAME": p.Name, "VOLUME_NAME": p.Volume, "IMAGE_DESTINATION": p.Destination} {
		if v == "" {
			return 0, fmt.Errorf("param %s is required", param)
		}
	}
	for _, n := range []struct{ param, v string }{{"EXPORT_SOURCE_NAME", p.Name}, {"VOLUME_NAME", p.Volume}, {"SECRET_NAME", p.SecretName}, {"CERT_CONFIGMAP", p.CertConfigMap}} {
		if errs := validation.IsDNS1123Subdomain(n.v); n.v != "" && len(errs) > 0 {
			return 0, fmt.Errorf("%s %q is not the name of an object in the TaskRun's namespace %s (no other namespace can be named): %s", n.param, n.v, p.Namespace, strings.Join(errs, "; "))
		}
	}
	p.Destination = strings.TrimPrefix(p.Destination, "docker://")
	minutes, err := strconv.Atoi(p.PushTimeout)
	if err != nil || minutes <= 0 {
		return 0, fmt.Errorf("PUSH_TIMEOUT %q is not a positive number of minutes", p.PushTimeout)
	}
	return time.Duration(minutes) * time.Minute, nil
}

// registry is the destination with the credentials and CA the params name.
func (p Params) registry(ctx context.Context, c client.Reader) (*images.Registry, error) {
	reg := &images.Registry{Ref: p.Destination}
	if p.SecretName != "" {
		user, pass, err := credentials.Basic(ctx, c, p.Namespace, p.SecretName)
		if err != nil {
			return nil, fmt.Errorf("SECRET_NAME: %w", err)
		}
		reg.Auth = &authn.Basic{Username: user, Password: pass}
	}
	if p.CertConfigMap != "" {
		ca, err := credentials.CABundle(ctx, c, p.Namespace, p.CertConfigMap)
		if err != nil {
			return nil, fmt.Errorf("CERT_CONFIGMAP: %w", err)
		}
		reg.CA = ca
	}
	return reg, nil
}

// sourceIdle checks that nothing writes the disk while it is pushed: a VM
// must be stopped and have the claim as a volume; a PVC must exist and no
// running VMI use it. (KubeVirt's VirtualMachineExport asks the same.)
func sourceIdle(ctx context.Context, c client.Reader, p Params) error {
	key := client.ObjectKey{Namespace: p.Namespace, Name: p.Name}
	if p.Kind == KindVM {
		vm := &v1.VirtualMachine{}
		if err := c.Get(ctx, key, vm); err != nil {
			return fmt.Errorf("EXPORT_SOURCE_NAME: VM %s: %w", key, err)
		}
		if claims := vmClaims(vm.Spec.Template); !slices.Contains(claims, p.Volume) {
			return fmt.Errorf("VOLUME_NAME: VM %s has no volume on claim %q (its claims: %s)", key, p.Volume, strings.Join(claims, ", "))
		}
	} else {
		if err := c.Get(ctx, key, &corev1.PersistentVolumeClaim{}); err != nil {
			return fmt.Errorf("EXPORT_SOURCE_NAME: PVC %s: %w", key, err)
		}
		if p.Volume != p.Name {
			return fmt.Errorf("VOLUME_NAME %q is not the PVC EXPORT_SOURCE_NAME %q names", p.Volume, p.Name)
		}
	}
	vmis := &v1.VirtualMachineInstanceList{}
	if err := c.List(ctx, vmis, client.InNamespace(p.Namespace)); err != nil {
		return fmt.Errorf("listing the VMIs of %s: %w", p.Namespace, err)
	}
	for i := range vmis.Items {
		vmi := &vmis.Items[i]
		if vmi.IsFinal() || !slices.Contains(vmiClaims(vmi), p.Volume) {
			continue
		}
		return fmt.Errorf("claim %s is in use by VMI %s/%s (phase %s): stop its VM before pushing the disk", p.Volume, vmi.Namespace, vmi.Name, vmi.Status.Phase)
	}
	return nil
}

// vmClaims are the claims a VM's volumes name (a DataVolume's claim has its name).
func vmClaims(t *v1.VirtualMachineInstanceTemplateSpec) []string {
	if t == nil {
		return nil
	}
	return claimsOf(t.Spec.Volumes)
}

func vmiClaims(vmi *v1.VirtualMachineInstance) []string { return claimsOf(vmi.Spec.Volumes) }

func claimsOf(vols []v1.Volume) []string {
	var out []string
	for _, v := range vols {
		switch {
		case v.PersistentVolumeClaim != nil:
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		case v.DataVolume != nil:
			out = append(out, v.DataVolume.Name)
		}
	}
	return out
}

func bytesText(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String()
}
