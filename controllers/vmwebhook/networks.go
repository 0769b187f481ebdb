package vmwebhook

import (
	"context"
	"encoding/json"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/podnetwork"
	"github.com/tekvirt/tekvirt/controllers/requester"
)

// NetworkAttachmentDefinitions' API group and resource, which Multus reads.
const (
	nadGroup    = "k8s.cni.cncf.io"
	nadResource = "network-attachment-definitions"
)

// mayUseNetworks checks the spec's Multus networks (at prefix) for the
// user u creating a VMI or VM in ns: each must name a
// NetworkAttachmentDefinition of ns, which u may get. A network of another
// namespace would attach a tenant's VM to whatever that namespace's
// administrator wired, and one u may not read to what u was not given.
func (v Validator) mayUseNetworks(ctx context.Context, u authnv1.UserInfo, ns, prefix string, networks []v1.Network) error {
	for i, n := range networks {
		if n.Multus == nil {
			continue
		}
		field := fmt.Sprintf("%s.networks[%d].multus.networkName", prefix, i)
		nadNS, name, err := podnetwork.NetworkAttachment(n.Multus.NetworkName, ns)
		if err != nil {
			return fmt.Errorf("%s.networks[%d].multus.%w", prefix, i, err)
		}
		if nadNS != ns {
			return fmt.Errorf("%s %q: a NetworkAttachmentDefinition of another namespace (%s) is refused; name one of namespace %s", field, n.Multus.NetworkName, nadNS, ns)
		}
		ok, err := requester.Allowed(ctx, v.Client, u, &authzv1.ResourceAttributes{Namespace: ns, Verb: "get", Group: nadGroup, Resource: nadResource, Name: name})
		if err != nil {
			return fmt.Errorf("checking whether %s may read NetworkAttachmentDefinition %s/%s: %w", u.Username, ns, name, err)
		}
		if !ok {
			return fmt.Errorf("%s: %s may not get NetworkAttachmentDefinition %s/%s", field, u.Username, ns, name)
		}
	}
	return nil
}

// vmNetworksChanged reports whether a VM request sets Multus networks
// anew: on create, or an update that changes the template's networks.
func vmNetworksChanged(req admission.Request, vm *v1.VirtualMachine) (bool, error) {
	networks := func(vm *v1.VirtualMachine) []v1.Network {
		if vm.Spec.Template == nil {
			return nil
		}
		return vm.Spec.Template.Spec.Networks
	}
	if req.Operation != admissionv1.Update {
		return true, nil
	}
	var old v1.VirtualMachine
	if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
		return false, decodeError{fmt.Errorf("decoding the old VirtualMachine: %w", err)}
	}
	return !equality.Semantic.DeepEqual(networks(&old), networks(vm)), nil
}
