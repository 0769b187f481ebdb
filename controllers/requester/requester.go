package requester

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// Annotation holds the requesting user as JSON (authentication/v1 UserInfo).
const Annotation = "tekvirt.io/requester"

var (
	// ErrNotRecorded means the object carries no requester (it was created
	// before requesters were recorded); it cannot clone.
	ErrNotRecorded = errors.New("no requester recorded")
	// ErrDenied means the requester may not clone from the namespace.
	ErrDenied = errors.New("permission denied")
)

// Encode is u as the annotation's value.
func Encode(u authnv1.UserInfo) string {
	data, _ := json.Marshal(u) // a UserInfo always marshals
	return string(data)
}

// Of returns the requester recorded on obj.
func Of(obj metav1.Object) (authnv1.UserInfo, error) {
	var u authnv1.UserInfo
	v, ok := obj.GetAnnotations()[Annotation]
	if !ok {
		return u, fmt.Errorf("%w on %s", ErrNotRecorded, obj.GetName())
	}
	if err := json.Unmarshal([]byte(v), &u); err != nil {
		return u, fmt.Errorf("annotation %s of %s: %w", Annotation, obj.GetName(), err)
	}
	if u.Username == "" {
		return u, fmt.Errorf("annotation %s of %s names no user", Annotation, obj.GetName())
	}
	return u, nil
}

// Source is a place a clone reads from: a DataSource or a PVC.
type Source struct{ Kind, Namespace, Name string }

// MayCloneFrom checks MayClone in the namespace of every source, and names
// the user and the first source refused.
func MayCloneFrom(ctx context.Context, c client.Client, u authnv1.UserInfo, sources ...Source) error {
	for _, s := range sources {
		if err := MayClone(ctx, c, u, s.Namespace); err != nil {
			return fmt.Errorf("%s may not clone %s %s/%s: %w", u.Username, s.Kind, s.Namespace, s.Name, err)
		}
	}
	return nil
}

// MayClone checks CDI's clone permission: u may create datavolumes/source
// in ns, the namespace a clone reads from (a PVC's or a DataSource's).
// The error names the user and the permission.
func MayClone(ctx context.Context, c client.Client, u authnv1.UserInfo, ns string) error {
	ok, err := Allowed(ctx, c, u, &authzv1.ResourceAttributes{Namespace: ns, Verb: "create",
		Group: cdiv1.SchemeGroupVersion.Group, Resource: "datavolumes", Subresource: "source"})
	if err != nil {
		return fmt.Errorf("checking the clone permission of %s in namespace %s: %w", u.Username, ns, err)
	}
	if !ok {
		return fmt.Errorf("%w: cloning needs create on datavolumes/source in namespace %s", ErrDenied, ns)
	}
	return nil
}

// Allowed asks the API server (a SubjectAccessReview) whether u may do
// what ra says.
func Allowed(ctx context.Context, c client.Client, u authnv1.UserInfo, ra *authzv1.ResourceAttributes) (bool, error) {
	extra := map[string]authzv1.ExtraValue{}
	for k, e := range u.Extra {
		extra[k] = authzv1.ExtraValue(e)
	}
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra, ResourceAttributes: ra}}
	if err := c.Create(ctx, sar); err != nil {
		return false, err
	}
	return sar.Status.Allowed, nil
}
