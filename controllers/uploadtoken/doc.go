// Package uploadtoken serves CDI's upload.cdi.kubevirt.io/v1beta1 API as
// an aggregated API server behind the kube-apiserver: creating an
// UploadTokenRequest returns a short-lived token (an Ed25519-signed JWT)
// for uploads into one PVC. The kube-apiserver authenticates and
// authorizes the caller (create uploadtokenrequests in the namespace) and
// proxies the request with a front-proxy client certificate, which this
// server verifies. The signing key lives in a Secret in the controller's
// namespace, created on first start.
package uploadtoken
