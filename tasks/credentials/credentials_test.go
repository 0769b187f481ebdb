package credentials

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestBasicAndCABundle(t *testing.T) {
	c := fake.NewClientBuilder().WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "good"}, Data: map[string][]byte{"accessKeyId": []byte("u"), "secretKey": []byte("p")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "half"}, Data: map[string][]byte{"accessKeyId": []byte("u")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ca"}, Data: map[string]string{"b.crt": "B", "a.crt": "A"}},
	).Build()
	ctx := context.Background()
	if u, p, err := Basic(ctx, c, "ns", "good"); u != "u" || p != "p" || err != nil {
		t.Errorf("good secret: %q %q %v", u, p, err)
	}
	if _, _, err := Basic(ctx, c, "ns", "half"); err == nil || !strings.Contains(err.Error(), "ns/half needs accessKeyId and secretKey") {
		t.Errorf("secret without secretKey: %v", err)
	}
	if _, _, err := Basic(ctx, c, "other", "good"); err == nil || !strings.Contains(err.Error(), "credentials secret other/good") {
		t.Errorf("secret of another namespace: %v", err)
	}
	if pem, err := CABundle(ctx, c, "ns", "ca"); string(pem) != "A\nB\n" || err != nil {
		t.Errorf("bundle %q, %v", pem, err)
	}
	if _, err := CABundle(ctx, c, "ns", "none"); err == nil || !strings.Contains(err.Error(), "certificate ConfigMap ns/none") {
		t.Errorf("missing ConfigMap: %v", err)
	}
}
