package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	tektonclient "github.com/tektoncd/pipeline/pkg/client/clientset/versioned"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/e2e/framework"
)

// TestAttackDiskUploaderAcrossNamespaces: a tenant with edit in their own
// namespace, where an admin bound disk-uploader's ClusterRole to a
// ServiceAccount (as the task's README says), tries to push another
// namespace's disk, or their own disk with the other namespace's registry
// credentials and CA:
//  1. a TaskRun in the catalog namespace, whose ServiceAccount holds the
//     role there: refused, the tenant may not create runs there;
//  2. their own copy of the task whose step is told the victim's namespace
//     (TASKRUN_NAMESPACE), with a claim of the same name as the victim's:
//     the step can read nothing there (not the PVC, not the Secret);
//  3. a claim of theirs naming the victim's volume (spec.volumeName): it
//     never binds, the run's Pod never starts, the run times out.
//
// Nothing reaches the registry, and the victim's volume stays its own.
func TestAttackDiskUploaderAcrossNamespaces(t *testing.T) {
	t.Parallel() // mostly waiting on Pods and runs: see "Parallel" in doc.go
	f := framework.New(t)
	c := f.VMClient(t)
	ctx := context.Background()
	victim, mine := f.Namespace(t), f.Namespace(t)
	id := rand.String(5)
	reg := startTLSRegistry(t, f)
	size := corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}}
	blank := func(ns string) *cdiv1.DataVolume {
		return &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secret"},
			Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}}, Storage: &cdiv1.StorageSpec{Resources: size}}}
	}
	theirs, own := blank(victim), blank(mine)
	for _, o := range []client.Object{theirs, own,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: victim, Name: "login"}, StringData: map[string]string{"accessKeyId": registryUser, "secretKey": registryPass}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: victim, Name: "ca"}, Data: map[string]string{"ca.crt": string(reg.ca)}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: "tenant-ca"}, Data: map[string]string{"ca.crt": string(reg.ca)}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: "uploader"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: "uploader"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "disk-uploader-task"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: mine, Name: "uploader"}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitDVPhase(t, c, theirs, cdiv1.Succeeded)
	waitDVPhase(t, c, own, cdiv1.Succeeded)
	tenant := userClient(t, f, mine, "e2e-tenant")
	cfg := rest.CopyConfig(f.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "e2e-tenant"}
	tenantTekton, err := tektonclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	sa := "system:serviceaccount:" + mine + ":uploader"
	for ns, want := range map[string]bool{mine: true, victim: false} {
		for _, res := range []string{"secrets", "persistentvolumeclaims", "configmaps"} {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: sa, Groups: []string{"system:serviceaccounts"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: res}}}
			got, err := f.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
			if err != nil || got.Status.Allowed != want {
				t.Errorf("%s may get %s in %s: %v, want %v (%v)", sa, res, ns, got.Status.Allowed, want, err)
			}
		}
	}

	private, public := reg.host+"/private/stolen:"+id, reg.host+"/public/stolen:"+id
	params := func(claim, dest, secret, ca string) map[string]any {
		return map[string]any{"EXPORT_SOURCE_KIND": "pvc", "EXPORT_SOURCE_NAME": claim, "VOLUME_NAME": claim,
			"IMAGE_DESTINATION": dest, "SECRET_NAME": secret, "CERT_CONFIGMAP": ca, "PUSH_TIMEOUT": "1"}
	}

	// 1. The catalog's own run, with the ServiceAccount bound there.
	inCatalog := framework.CatalogTaskRun("disk-uploader", params("secret", private, "", ""))
	if _, err := tenantTekton.TektonV1().TaskRuns(inCatalog.Namespace).Create(ctx, inCatalog, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("a TaskRun in the catalog namespace by the tenant: err = %v, want forbidden", err)
	}

	// 2. The tenant's copy of the task, its step told the victim's namespace.
	task, err := f.Tekton.TektonV1().Tasks(framework.CatalogNamespace).Get(ctx, "disk-uploader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	forged := task.Spec.DeepCopy()
	for i, e := range forged.Steps[0].Env {
		if e.Name == "TASKRUN_NAMESPACE" {
			forged.Steps[0].Env[i] = corev1.EnvVar{Name: e.Name, Value: victim}
		}
	}
	run := func(spec *pipelinev1.TaskSpec, p map[string]any, timeout time.Duration) *framework.TaskRunRunner {
		tr := framework.CatalogTaskRun("disk-uploader", p)
		tr.Namespace, tr.Spec.TaskRef, tr.Spec.TaskSpec, tr.Spec.ServiceAccountName = mine, nil, spec, "uploader"
		tr.Spec.Timeout = &metav1.Duration{Duration: timeout}
		return framework.NewTaskRunRunner(t, f, tr).WithTimeout(timeout + 2*time.Minute).As(tenantTekton).CreateTaskRun()
	}
	run(forged, params("secret", private, "login", "ca"), 3*time.Minute).
		ExpectFailure(`persistentvolumeclaims "secret" is forbidden: User "` + sa + `" cannot get .* in the namespace "` + victim + `"`)

	// 3. A claim of the tenant's on the victim's volume.
	claim := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: victim, Name: "secret"}, claim); err != nil {
		t.Fatal(err)
	}
	stolen := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: "stolen"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: claim.Spec.AccessModes, Resources: claim.Spec.Resources, StorageClassName: claim.Spec.StorageClassName, VolumeName: claim.Spec.VolumeName}}
	if err := tenant.Create(ctx, stolen); err != nil {
		t.Fatal(err)
	}
	run(&task.Spec, params("stolen", public, "", "tenant-ca"), 30*time.Second).ExpectFailure(`failed to finish within "30s"`)
	if err := c.Get(ctx, client.ObjectKeyFromObject(stolen), stolen); err != nil || stolen.Status.Phase == corev1.ClaimBound {
		t.Errorf("the tenant's claim on the victim's volume %s: phase %s (%v)", claim.Spec.VolumeName, stolen.Status.Phase, err)
	}
	pv := &corev1.PersistentVolume{}
	if err := c.Get(ctx, client.ObjectKey{Name: claim.Spec.VolumeName}, pv); err != nil || pv.Spec.ClaimRef == nil ||
		pv.Spec.ClaimRef.Namespace != victim || pv.Spec.ClaimRef.UID != claim.UID {
		t.Errorf("the victim's volume %s is bound to %+v (%v), want %s/secret", pv.Name, pv.Spec.ClaimRef, err, victim)
	}

	login := remote.WithAuth(&authn.Basic{Username: registryUser, Password: registryPass})
	for _, dest := range []string{private, public} {
		ref, err := name.ParseReference(dest)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := remote.Head(ref, remote.WithTransport(reg.tr), login); err == nil {
			t.Errorf("%s was pushed", dest)
		}
	}
}
