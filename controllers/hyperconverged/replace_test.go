package hyperconverged

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/utils/ptr"
)

func TestStorageClassChanged(t *testing.T) {
	base := func() *storagev1.StorageClass {
		return &storagev1.StorageClass{Provisioner: "hostpath.csi.tekvirt.io", Parameters: map[string]string{"shared": "true"},
			ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimDelete), VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate)}
	}
	for _, tc := range []struct {
		name string
		want func(*storagev1.StorageClass)
		same bool
	}{
		{"the same", func(*storagev1.StorageClass) {}, true},
		{"defaults left unset", func(c *storagev1.StorageClass) { c.ReclaimPolicy, c.VolumeBindingMode = nil, nil }, true},
		{"a label is no immutable field", func(c *storagev1.StorageClass) { c.Labels = map[string]string{"a": "b"} }, true},
		{"another provisioner", func(c *storagev1.StorageClass) { c.Provisioner = "tekvirt.io/hostpath" }, false},
		{"other parameters", func(c *storagev1.StorageClass) { c.Parameters = nil }, false},
		{"another reclaim policy", func(c *storagev1.StorageClass) { c.ReclaimPolicy = ptr.To(corev1.PersistentVolumeReclaimRetain) }, false},
		{"another binding mode", func(c *storagev1.StorageClass) {
			c.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
		}, false},
	} {
		want := base()
		tc.want(want)
		if got := storageClassChanged(base(), want); got == tc.same {
			t.Errorf("%s: changed = %v", tc.name, got)
		}
	}
}
