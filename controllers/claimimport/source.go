package claimimport

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/datavolume"
)

// The annotations a user puts on a claim to have it imported, as CDI's.
const (
	AnnEndpoint      = "cdi.kubevirt.io/storage.import.endpoint"
	AnnSource        = "cdi.kubevirt.io/storage.import.source"
	AnnSecret        = "cdi.kubevirt.io/storage.import.secretName"
	AnnCertConfigMap = "cdi.kubevirt.io/storage.import.certConfigMap"
	AnnContentType   = "cdi.kubevirt.io/storage.contentType"
)

// The sources of AnnSource tekvirt imports from (http when unset).
const (
	SourceHTTP     = "http"
	SourceRegistry = "registry"
	SourceNone     = "none"
)

// DataVolume is the DataVolume whose import the claim's annotations ask
// for: its source and content type, named after the claim. Annotations
// tekvirt cannot honour are an error naming them.
func DataVolume(pvc *corev1.PersistentVolumeClaim) (*cdiv1.DataVolume, error) {
	a := pvc.Annotations
	endpoint, secret, certs := a[AnnEndpoint], a[AnnSecret], a[AnnCertConfigMap]
	src := &cdiv1.DataVolumeSource{}
	switch s := a[AnnSource]; s {
	case "", SourceHTTP:
		src.HTTP = &cdiv1.DataVolumeSourceHTTP{URL: endpoint, SecretRef: secret, CertConfigMap: certs}
	case SourceRegistry:
		src.Registry = &cdiv1.DataVolumeSourceRegistry{URL: ptr.To(endpoint)}
		if secret != "" {
			src.Registry.SecretRef = ptr.To(secret)
		}
		if certs != "" {
			src.Registry.CertConfigMap = ptr.To(certs)
		}
	case SourceNone:
		src.Blank = &cdiv1.DataVolumeBlankImage{}
	default:
		return nil, fmt.Errorf("annotation %s: %q is not supported (%s)", AnnSource, s, strings.Join([]string{SourceHTTP, SourceRegistry, SourceNone}, ", "))
	}
	if endpoint == "" && src.Blank == nil {
		return nil, fmt.Errorf("annotation %s is empty", AnnEndpoint)
	}
	ct := cdiv1.DataVolumeContentType(a[AnnContentType])
	if ct != "" && ct != cdiv1.DataVolumeKubeVirt {
		return nil, fmt.Errorf("annotation %s: %q is not supported (%s)", AnnContentType, ct, cdiv1.DataVolumeKubeVirt)
	}
	dv := &cdiv1.DataVolume{
		ObjectMeta: metav1.ObjectMeta{Namespace: pvc.Namespace, Name: pvc.Name},
		Spec:       cdiv1.DataVolumeSpec{Source: src, ContentType: ct},
	}
	if err := datavolume.Supported(dv); err != nil {
		return nil, fmt.Errorf("the import the annotations ask for: %w", err)
	}
	return dv, nil
}
