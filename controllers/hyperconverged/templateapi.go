package hyperconverged

import (
	"context"
	"fmt"
	"io/fs"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tekvirt/tekvirt/catalog"
	ctrlconfig "github.com/tekvirt/tekvirt/controllers/config"
)

// Where the Template API comes from when the cluster does not serve it.
const (
	TemplateCRDName = "templates.template.openshift.io"
	templateCRDFile = "crd/template.openshift.io_templates.yaml"
)

// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=create
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;patch,resourceNames=templates.template.openshift.io
// +kubebuilder:rbac:groups=template.openshift.io,resources=templates,verbs=get;create;patch;delete

// ensureTemplateAPI makes template.openshift.io/v1 Templates available: a
// cluster that serves them itself (OpenShift's API server) is left alone;
// elsewhere the operator installs, and keeps current, the CRD generated
// from OpenShift's types. It says which.
func (r *Reconciler) ensureTemplateAPI(ctx context.Context) (string, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	err := r.reader().Get(ctx, client.ObjectKey{Name: TemplateCRDName}, crd)
	switch {
	case err == nil && crd.Labels[ManagedByLabel] != ManagedBy:
		return "a CustomResourceDefinition tekvirt does not manage", nil
	case apierrors.IsNotFound(err):
		_, mapErr := r.Client.RESTMapper().RESTMapping(schema.GroupKind{Group: "template.openshift.io", Kind: "Template"}, "v1")
		if mapErr == nil {
			return "the cluster's own API", nil
		}
		if !meta.IsNoMatchError(mapErr) {
			return "", fmt.Errorf("looking up the Template API: %w", mapErr)
		}
	case err != nil:
		return "", fmt.Errorf("reading CustomResourceDefinition %s: %w", TemplateCRDName, err)
	}
	data, err := fs.ReadFile(ctrlconfig.FS, templateCRDFile)
	if err != nil {
		return "", err
	}
	docs, err := ctrlconfig.Decode(data)
	if err != nil {
		return "", fmt.Errorf("decoding %s: %w", templateCRDFile, err)
	}
	if len(docs) != 1 {
		return "", fmt.Errorf("%s holds %d objects, want 1", templateCRDFile, len(docs))
	}
	o := docs[0]
	labels := o.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[ManagedByLabel] = ManagedBy
	o.SetLabels(labels)
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), fieldOwner, client.ForceOwnership); err != nil {
		return "", fmt.Errorf("applying CustomResourceDefinition %s: %w", TemplateCRDName, err)
	}
	return "tekvirt's CustomResourceDefinition", nil
}

func (r *Reconciler) reader() client.Reader {
	if r.Reader != nil {
		return r.Reader
	}
	return r.Client
}

// installTemplates applies the common templates into ns (created if
// absent), labelled as the operator's, and lets every authenticated user
// read them; it returns how many templates.
func (r *Reconciler) installTemplates(ctx context.Context, ns string) (int, error) {
	docs, err := commonTemplates(ns)
	if err != nil {
		return 0, err
	}
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{ManagedByLabel: ManagedBy}}}
	if err := r.Client.Create(ctx, nsObj); err != nil && !apierrors.IsAlreadyExists(err) {
		return 0, fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	for _, o := range docs {
		if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), fieldOwner, client.ForceOwnership); err != nil {
			return 0, fmt.Errorf("applying %s %s/%s: %w", o.GetKind(), ns, o.GetName(), err)
		}
	}
	return len(docs) - 1, nil
}

// commonTemplates are the common templates as installed into ns, and the
// RoleBinding that lets every authenticated user read them, labelled as
// the operator's.
func commonTemplates(ns string) ([]*unstructured.Unstructured, error) {
	data, err := catalog.CommonTemplates()
	if err != nil {
		return nil, err
	}
	docs, err := ctrlconfig.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("decoding the common templates: %w", err)
	}
	docs = append(docs, templateReaders())
	for _, o := range docs {
		o.SetNamespace(ns)
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[ManagedByLabel] = ManagedBy
		o.SetLabels(labels)
	}
	return docs, nil
}

// TemplateReadersBinding binds CommonTemplatesReaderRole to every
// authenticated user in the common templates' namespace.
const (
	TemplateReadersBinding    = "tekvirt-common-templates-readers"
	CommonTemplatesReaderRole = "tekvirt-common-templates-reader"
)

// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=tekvirt-common-templates-reader

func templateReaders() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1",
		"kind":       "RoleBinding",
		"metadata":   map[string]any{"name": TemplateReadersBinding},
		"roleRef": map[string]any{
			"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CommonTemplatesReaderRole,
		},
		"subjects": []any{map[string]any{
			"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated",
		}},
	}}
}
