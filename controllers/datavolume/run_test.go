package datavolume

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"

	"github.com/tekvirt/tekvirt/catalog"
)

func registryDV(method *cdiv1.RegistryPullMethod) *cdiv1.DataVolume {
	return &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "root"},
		Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Registry: &cdiv1.DataVolumeSourceRegistry{
			URL: ptr.To("docker://127.0.0.1:5000/tekvirt/hosted-worker@sha256:1"), PullMethod: method}}}}
}

func TestImportRunPullMethod(t *testing.T) {
	task, err := catalog.InlineTask("import-disk", "reg/step@sha256:2")
	if err != nil {
		t.Fatal(err)
	}
	pvc := &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}

	byPod := ImportRun(registryDV(nil), pvc, task, 0, "key")
	if n := len(byPod.Spec.TaskSpec.Steps); n != 1 || byPod.Spec.TaskSpec.Steps[0].Image != "reg/step@sha256:2" {
		t.Fatalf("pullMethod pod: %d steps, image %s", n, byPod.Spec.TaskSpec.Steps[0].Image)
	}
	if !slices.ContainsFunc(byPod.Spec.Params, func(p pipelinev1.Param) bool { return p.Name == "registry" }) {
		t.Errorf("pullMethod pod: no registry param in %v", byPod.Spec.Params)
	}

	byNode := ImportRun(registryDV(ptr.To(cdiv1.RegistryPullNode)), pvc, task, 0, "key")
	steps := byNode.Spec.TaskSpec.Steps
	if len(steps) != 2 {
		t.Fatalf("pullMethod node: %d steps, want copy + import", len(steps))
	}
	cp, imp := steps[0], steps[1]
	if cp.Image != "reg/step@sha256:2" || !slices.Contains(cp.Command, "copy-self") {
		t.Errorf("copy step %s %v", cp.Image, cp.Command)
	}
	if imp.Image != "127.0.0.1:5000/tekvirt/hosted-worker@sha256:1" || imp.Command[0] != "/tekvirt-bin/tekvirt-step" || imp.Command[1] != "import-disk" {
		t.Errorf("import step runs %v in %s, want tekvirt-step from the shared volume in the containerDisk image", imp.Command, imp.Image)
	}
	if sc := imp.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 107 {
		t.Errorf("import step security context %+v, want it run as 107 (the image's own user may be root)", sc)
	}
	// Both steps keep the catalog's restricted context: a namespace
	// enforcing Pod Security "restricted" refuses the Pod otherwise.
	for _, st := range steps {
		sc := st.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot ||
			sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || sc.SeccompProfile == nil {
			t.Errorf("step %s security context %+v, want the restricted one", st.Name, sc)
		}
	}
	if imp.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("import step imagePullPolicy %q, want Always (never another namespace's cached pull)", imp.ImagePullPolicy)
	}
	args := strings.Join(imp.Args, " ")
	if !strings.Contains(args, "--container-disk-dir=/disk") || !strings.Contains(args, "--progress-addr=") {
		t.Errorf("import args %s", args)
	}
	if slices.ContainsFunc(byNode.Spec.Params, func(p pipelinev1.Param) bool { return p.Name == "registry" }) {
		t.Error("pullMethod node still passes the registry param: the step would fetch it itself")
	}
	if len(byNode.Spec.TaskSpec.Volumes) != 1 || byNode.Spec.TaskSpec.Volumes[0].EmptyDir == nil {
		t.Errorf("volumes %v, want one emptyDir", byNode.Spec.TaskSpec.Volumes)
	}
}

func TestNodePullRefusesCredentials(t *testing.T) {
	dv := registryDV(ptr.To(cdiv1.RegistryPullNode))
	if err := sourceSupported("registry", dv.Spec.Source); err != nil {
		t.Fatalf("node pull refused: %v", err)
	}
	dv.Spec.Source.Registry.SecretRef = ptr.To("creds")
	if err := sourceSupported("registry", dv.Spec.Source); err == nil || !strings.Contains(err.Error(), "pullMethod node") {
		t.Fatalf("secretRef with node pull: %v", err)
	}
}
