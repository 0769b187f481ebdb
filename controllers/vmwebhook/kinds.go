package vmwebhook

import (
	"context"
	"encoding/json"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/config"
	"github.com/tekvirt/tekvirt/controllers/dataimportcron"
	"github.com/tekvirt/tekvirt/controllers/datasource"
	"github.com/tekvirt/tekvirt/controllers/datavolume"
	"github.com/tekvirt/tekvirt/controllers/instancetype"
	"github.com/tekvirt/tekvirt/controllers/templatevalidation"
)

// decodeError marks a request whose object cannot be decoded: a bad
// request rather than a refusal.
type decodeError struct{ error }

// decode reads the request's object into typed (and, when given, its spec
// as a map for the field allowlists).
func decode(req admission.Request, typed any, spec *map[string]any) error {
	if err := json.Unmarshal(req.Object.Raw, typed); err != nil {
		return decodeError{fmt.Errorf("decoding the %s: %w", req.Kind.Kind, err)}
	}
	if spec == nil {
		return nil
	}
	var obj struct {
		Spec map[string]any `json:"spec"`
	}
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return decodeError{fmt.Errorf("decoding the %s: %w", req.Kind.Kind, err)}
	}
	*spec = obj.Spec
	return nil
}

// virtualMachine: supported fields, valid names, and the clone rights of
// its dataVolumeTemplates.
func (v Validator) virtualMachine(ctx context.Context, req admission.Request) error {
	var vm kubevirtv1.VirtualMachine
	var spec map[string]any
	if err := decode(req, &vm, &spec); err != nil {
		return err
	}
	if err := ValidateVMSpec(spec); err != nil {
		return err
	}
	if err := v.vmTemplate(ctx, req, &vm); err != nil {
		return err
	}
	if err := v.sizing(ctx, req, &vm); err != nil {
		return err
	}
	if changed, err := templateChanged(req, &vm); err != nil || changed {
		if err != nil {
			return err
		}
		warnings, err := v.templateRules(ctx, req.UserInfo, req.Object.Raw, &vm)
		warn(ctx, warnings...)
		if err != nil {
			return err
		}
	}
	return v.dataVolumeTemplates(ctx, req, &vm)
}

// vmTemplate checks vm's template: runnable, and, when the request sets
// them anew, credentials and networks its author may use.
func (v Validator) vmTemplate(ctx context.Context, req admission.Request, vm *kubevirtv1.VirtualMachine) error {
	t := vm.Spec.Template
	if t == nil {
		return nil
	}
	msgs := checkNames("spec.template.spec", &t.Spec)
	msgs = append(msgs, checkRunnable("spec.template.spec", &t.Spec, vm.Spec.Instancetype == nil)...)
	msgs = append(msgs, checkAccessCredentials("spec.template.spec", &t.Spec)...)
	if err := joined(msgs); err != nil {
		return err
	}
	if changed, err := vmCredentialsChanged(req, vm); err != nil || changed {
		if err == nil {
			err = v.maySeeSecrets(ctx, req.UserInfo, req.Namespace, "spec.template.spec", t.Spec.AccessCredentials)
		}
		if err != nil {
			return err
		}
	}
	if changed, err := vmNetworksChanged(req, vm); err != nil || changed {
		if err == nil {
			err = v.mayUseNetworks(ctx, req.UserInfo, req.Namespace, "spec.template.spec", t.Spec.Networks)
		}
		return err
	}
	return nil
}

// sizing checks, when a VM is created or names another instancetype or
// preference, that they exist, are within what tekvirt implements, and
// do not conflict with the VM's own fields, as KubeVirt's admission does.
func (v Validator) sizing(ctx context.Context, req admission.Request, vm *kubevirtv1.VirtualMachine) error {
	if vm.Spec.Instancetype == nil && vm.Spec.Preference == nil {
		return nil
	}
	if req.Operation == admissionv1.Update {
		var old kubevirtv1.VirtualMachine
		if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
			return decodeError{fmt.Errorf("decoding the old VirtualMachine: %w", err)}
		}
		if equality.Semantic.DeepEqual(old.Spec.Instancetype, vm.Spec.Instancetype) && equality.Semantic.DeepEqual(old.Spec.Preference, vm.Spec.Preference) &&
			equality.Semantic.DeepEqual(old.Spec.Template, vm.Spec.Template) {
			return nil
		}
	}
	if _, err := instancetype.Resolve(ctx, v.Reader, vm); err != nil {
		return fmt.Errorf("VirtualMachine %s/%s: %w", vm.Namespace, vm.Name, err)
	}
	return nil
}

// virtualMachineInstance: supported fields and valid names on create; the
// spec never changes after (status goes through its subresource, which
// this webhook does not see).
func (v Validator) virtualMachineInstance(ctx context.Context, req admission.Request) error {
	if req.Operation == admissionv1.Update {
		return specUnchanged(req)
	}
	var vmi kubevirtv1.VirtualMachineInstance
	var spec map[string]any
	if err := decode(req, &vmi, &spec); err != nil {
		return err
	}
	if err := ValidateVMISpec(spec); err != nil {
		return err
	}
	msgs := append(checkNames("spec", &vmi.Spec), checkRunnable("spec", &vmi.Spec, true)...)
	if err := joined(append(msgs, checkAccessCredentials("spec", &vmi.Spec)...)); err != nil {
		return err
	}
	// A VM's VMI: the VM's admission checked who set its credentials and
	// networks.
	if req.UserInfo.Username == config.ControllerUser {
		return nil
	}
	if err := v.mayUseNetworks(ctx, req.UserInfo, req.Namespace, "spec", vmi.Spec.Networks); err != nil {
		return err
	}
	return v.maySeeSecrets(ctx, req.UserInfo, req.Namespace, "spec", vmi.Spec.AccessCredentials)
}

// dataVolume: a supported source and, for clones, the requester's right to
// clone; as in CDI the spec never changes after creation (another source
// is another DataVolume).
func (v Validator) dataVolume(ctx context.Context, req admission.Request) error {
	if req.Operation == admissionv1.Update {
		return specUnchanged(req)
	}
	var dv cdiv1.DataVolume
	if err := decode(req, &dv, nil); err != nil {
		return err
	}
	if err := datavolume.Supported(&dv); err != nil {
		return err
	}
	return v.mayClone(ctx, requesterOf(&dv, req), &dv)
}

// dataSource: a supported source that its author may clone from.
func (v Validator) dataSource(ctx context.Context, req admission.Request) error {
	var ds cdiv1.DataSource
	if err := decode(req, &ds, nil); err != nil {
		return err
	}
	if err := datasource.Supported(&ds); err != nil {
		return err
	}
	return v.mayPublish(ctx, req.UserInfo, &ds)
}

func dataImportCron(_ context.Context, req admission.Request) error {
	var c cdiv1.DataImportCron
	if err := decode(req, &c, nil); err != nil {
		return err
	}
	return dataimportcron.Supported(&c)
}

// templateChanged says whether the request creates vm or changes what its
// template's rules look at (its VMI template, its rules, its template), so
// that an update of anything else (a run strategy) is never refused for
// rules the VM was admitted under.
func templateChanged(req admission.Request, vm *kubevirtv1.VirtualMachine) (bool, error) {
	if req.Operation != admissionv1.Update {
		return true, nil
	}
	var old kubevirtv1.VirtualMachine
	if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
		return false, decodeError{fmt.Errorf("decoding the old VirtualMachine: %w", err)}
	}
	return !equality.Semantic.DeepEqual(old.Spec.Template, vm.Spec.Template) ||
		old.Annotations[templatevalidation.VMAnnotation] != vm.Annotations[templatevalidation.VMAnnotation] ||
		old.Labels[templatevalidation.TemplateLabel] != vm.Labels[templatevalidation.TemplateLabel], nil
}
