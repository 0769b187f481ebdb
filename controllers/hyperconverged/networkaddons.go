package hyperconverged

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hcov1beta1 "github.com/tekvirt/tekvirt/controllers/apis/hco/v1beta1"
	nacv1 "github.com/tekvirt/tekvirt/controllers/apis/networkaddons/v1"
	ctrlconfig "github.com/tekvirt/tekvirt/controllers/config"
)

// NetworkAddonsJSONPatchAnnotation is HCO's: a JSON patch (RFC 6902) on
// the HyperConverged that the operator applies to the NetworkAddonsConfig
// it writes, the supported way to set what HCO does not (the MAC pool's
// range).
const NetworkAddonsJSONPatchAnnotation = "networkaddonsconfigs.kubevirt.io/jsonpatch"

// networkAddonsConfig is the NetworkAddonsConfig "cluster" as HCO writes it
// for hc, and its spec: Multus, the bridge plugin and the MAC pool on, the
// pool over a range of 02:XX:XX:00:00:00 to 02:XX:XX:FF:FF:FF (locally
// administered unicast; XX from hc's UID, where CNAO picks them at random,
// so that two clusters' VMs rarely share one), then hc's JSON patch. A
// patch that does not apply, or leaves a spec tekvirt does not serve, is
// an error naming the annotation.
func networkAddonsConfig(hc *hcov1beta1.HyperConverged) (*unstructured.Unstructured, nacv1.NetworkAddonsConfigSpec, error) {
	sum := sha256.Sum256([]byte(hc.UID))
	nac := &nacv1.NetworkAddonsConfig{Spec: nacv1.NetworkAddonsConfigSpec{
		Multus:      &nacv1.Multus{},
		LinuxBridge: &nacv1.LinuxBridge{},
		KubeMacPool: &nacv1.KubeMacPool{
			RangeStart: fmt.Sprintf("02:%02x:%02x:00:00:00", sum[0], sum[1]),
			RangeEnd:   fmt.Sprintf("02:%02x:%02x:ff:ff:ff", sum[0], sum[1]),
		},
	}}
	doc, err := json.Marshal(map[string]any{
		"apiVersion": nacv1.GroupVersion.String(), "kind": "NetworkAddonsConfig",
		"metadata": map[string]any{"name": nacv1.Name},
		"spec":     nac.Spec,
	})
	if err != nil {
		return nil, nac.Spec, err
	}
	if p := hc.Annotations[NetworkAddonsJSONPatchAnnotation]; p != "" {
		patch, err := jsonpatch.DecodePatch([]byte(p))
		if err != nil {
			return nil, nac.Spec, fmt.Errorf("annotation %s: %w", NetworkAddonsJSONPatchAnnotation, err)
		}
		if doc, err = patch.Apply(doc); err != nil {
			return nil, nac.Spec, fmt.Errorf("annotation %s: %w", NetworkAddonsJSONPatchAnnotation, err)
		}
		checked := &nacv1.NetworkAddonsConfig{}
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.DisallowUnknownFields()
		if err := dec.Decode(checked); err != nil {
			return nil, nac.Spec, fmt.Errorf("annotation %s: the patched NetworkAddonsConfig: %w", NetworkAddonsJSONPatchAnnotation, err)
		}
		nac = checked
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(doc); err != nil {
		return nil, nac.Spec, err
	}
	obj.SetLabels(map[string]string{ManagedByLabel: ManagedBy, "app.kubernetes.io/part-of": "tekvirt"})
	return obj, nac.Spec, nil
}

// networkAddonFiles are the manifests (ctrlconfig.NetworkAddonFiles) of
// the add-ons spec turns on, and of those it leaves off.
func networkAddonFiles(spec nacv1.NetworkAddonsConfigSpec) (on, off []string) {
	for file, enabled := range map[string]bool{
		ctrlconfig.MultusFile:      spec.Multus != nil,
		ctrlconfig.LinuxBridgeFile: spec.LinuxBridge != nil,
	} {
		if enabled {
			on = append(on, file)
		} else {
			off = append(off, file)
		}
	}
	slices.Sort(on)
	slices.Sort(off)
	return on, off
}

// networkAddonsStatus writes the NetworkAddonsConfig's conditions as CNAO
// does: Available once every component (the MAC pool is the controller's
// webhook) runs, Progressing while some do not, never Degraded here (a
// component's failure shows on the HyperConverged).
func (r *Reconciler) networkAddonsStatus(ctx context.Context, notReady []string, version string) error {
	nac := &nacv1.NetworkAddonsConfig{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: nacv1.Name}, nac); err != nil {
		return fmt.Errorf("reading NetworkAddonsConfig %s: %w", nacv1.Name, err)
	}
	now := metav1.NewTime(r.now())
	available, progressing := corev1.ConditionTrue, corev1.ConditionFalse
	reason, msg := "AsExpected", "the network add-ons are deployed"
	if len(notReady) > 0 {
		available, progressing = corev1.ConditionFalse, corev1.ConditionTrue
		reason, msg = "Deploying", "waiting for "+strings.Join(notReady, ", ")
	}
	want := nac.DeepCopy()
	for _, c := range []nacv1.Condition{
		{Type: "Available", Status: available, Reason: reason, Message: msg},
		{Type: "Progressing", Status: progressing, Reason: reason, Message: msg},
		{Type: "Degraded", Status: corev1.ConditionFalse, Reason: "AsExpected"},
	} {
		i := slices.IndexFunc(want.Status.Conditions, func(x nacv1.Condition) bool { return x.Type == c.Type })
		if i < 0 {
			c.LastTransitionTime, c.LastHeartbeatTime = now, now
			want.Status.Conditions = append(want.Status.Conditions, c)
			continue
		}
		old := want.Status.Conditions[i]
		c.LastTransitionTime, c.LastHeartbeatTime = old.LastTransitionTime, old.LastHeartbeatTime
		if old.Status != c.Status {
			c.LastTransitionTime, c.LastHeartbeatTime = now, now
		}
		if old.Reason != c.Reason || old.Message != c.Message {
			c.LastHeartbeatTime = now
		}
		want.Status.Conditions[i] = c
	}
	want.Status.ObservedVersion, want.Status.OperatorVersion, want.Status.TargetVersion = version, version, version
	if equality.Semantic.DeepEqual(want.Status, nac.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, want, client.MergeFrom(nac)); err != nil {
		return fmt.Errorf("status of NetworkAddonsConfig %s: %w", nacv1.Name, err)
	}
	return nil
}
