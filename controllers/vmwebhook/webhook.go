package vmwebhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	authnv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/datavolume"
	"github.com/tekvirt/tekvirt/controllers/requester"
)

// Path is where the webhook is served.
const Path = "/validate-kubevirt-io-v1"

// Validator admits VirtualMachines, VirtualMachineInstances and
// DataVolumes whose spec uses only supported fields, and clones only by
// users allowed to read the source, as CDI does.
type Validator struct {
	// Client creates the SubjectAccessReviews of clone sources.
	Client client.Client
	// Reader reads the instancetypes and preferences VMs name.
	Reader client.Reader
}

// Handle implements admission.Handler.
func (v Validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation == admissionv1.Delete {
		if req.Kind.Kind != "HyperConverged" {
			return admission.Allowed("")
		}
		if err := v.hyperConvergedDelete(ctx, req); err != nil {
			return admission.Denied(err.Error())
		}
		return admission.Allowed("")
	}
	check, ok := map[string]func(context.Context, admission.Request) error{
		"VirtualMachine":         v.virtualMachine,
		"VirtualMachineInstance": v.virtualMachineInstance,
		"DataVolume":             v.dataVolume,
		"DataSource":             v.dataSource,
		"DataImportCron":         dataImportCron,
		"HostedCluster":          hostedCluster,
		"NodePool":               nodePool,

		"VirtualMachineInstanceMigration": v.virtualMachineInstanceMigration,
		"VirtualMachineSnapshot":          virtualMachineSnapshot,
		"VirtualMachineRestore":           virtualMachineRestore,
	}[req.Kind.Kind]
	if !ok {
		return admission.Allowed("")
	}
	var warnings []string
	ctx = context.WithValue(ctx, warningsKey{}, &warnings)
	err := check(ctx, req)
	var bad decodeError
	if errors.As(err, &bad) {
		return admission.Errored(http.StatusBadRequest, bad.error)
	}
	if err != nil {
		return admission.Denied(err.Error()).WithWarnings(warnings...)
	}
	return admission.Allowed("").WithWarnings(warnings...)
}

// warningsKey holds, in a check's context, the warnings it returns to
// the user with its answer.
type warningsKey struct{}

func warn(ctx context.Context, msgs ...string) {
	if w, ok := ctx.Value(warningsKey{}).(*[]string); ok {
		*w = append(*w, msgs...)
	}
}

// dataVolumeTemplates checks a VM's DataVolumes as if created on their
// own: all of them when the VM is created or its templates change, by the
// user the requester webhook recorded for that change.
func (v Validator) dataVolumeTemplates(ctx context.Context, req admission.Request, vm *kubevirtv1.VirtualMachine) error {
	check := req.Operation == admissionv1.Create
	if req.Operation == admissionv1.Update {
		var old kubevirtv1.VirtualMachine
		if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
			return fmt.Errorf("decoding the stored VirtualMachine: %w", err)
		}
		check = !equality.Semantic.DeepEqual(old.Spec.DataVolumeTemplates, vm.Spec.DataVolumeTemplates)
	}
	u := requesterOf(vm, req)
	for i, t := range vm.Spec.DataVolumeTemplates {
		dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: t.Name}, Spec: t.Spec}
		err := datavolume.Supported(dv)
		if err == nil && check {
			err = v.mayClone(ctx, u, dv)
		}
		if err != nil {
			return fmt.Errorf("spec.dataVolumeTemplates[%d] (%s): %w", i, t.Name, err)
		}
	}
	return nil
}

// requesterOf is the user the requester webhook recorded on obj (it runs
// before this one), or the one making the request.
func requesterOf(obj metav1.Object, req admission.Request) authnv1.UserInfo {
	if u, err := requester.Of(obj); err == nil {
		return u
	}
	return req.UserInfo
}

// mayClone checks CDI's clone permission for a pvc source or a DataSource
// reference: create on datavolumes/source in the source's namespace (the
// DataSource's, and its PVC's when that is another), for the user who
// asks for the DataVolume.
func (v Validator) mayClone(ctx context.Context, u authnv1.UserInfo, dv *cdiv1.DataVolume) error {
	src, err := datavolume.ResolveSource(ctx, v.Client, dv)
	if err != nil && !errors.Is(err, datavolume.ErrSourceNotReady) {
		return err
	}
	resolved := dv.DeepCopy()
	resolved.Spec.Source = src
	return requester.MayCloneFrom(ctx, v.Client, u, datavolume.CloneSources(resolved, datavolume.SourceRefKey(dv))...)
}

// mayPublish checks that whoever points a DataSource at a PVC or a
// DataSource of another namespace may clone from there, as CDI does:
// otherwise a DataSource would make that namespace's disk clonable by
// anyone who may clone from the DataSource's own namespace.
func (v Validator) mayPublish(ctx context.Context, u authnv1.UserInfo, ds *cdiv1.DataSource) error {
	ns, kind, name := "", "", ""
	switch src := ds.Spec.Source; {
	case src.PVC != nil:
		ns, kind, name = src.PVC.Namespace, "PVC", src.PVC.Name
	case src.DataSource != nil:
		ns, kind, name = src.DataSource.Namespace, "DataSource", src.DataSource.Name
	}
	if ns == "" || ns == ds.Namespace {
		return nil
	}
	if err := requester.MayClone(ctx, v.Client, u, ns); err != nil {
		return fmt.Errorf("%s may not point DataSource %s/%s at %s %s/%s: %w", u.Username, ds.Namespace, ds.Name, kind, ns, name, err)
	}
	return nil
}
