// Package uploadproxy is CDI's upload proxy: it takes uploads on CDI's
// paths (/v1beta1/upload, -async, -form, -form-async) with a bearer token
// from an UploadTokenRequest, checks the token, and forwards the request to
// the upload step of the DataVolume the token names. The step checks the
// token again, so its port is no way around the proxy.
package uploadproxy
