// Package pki signs and checks the X.509 certificates tekvirt's components
// make for themselves: the operator's CA and serving certificates, and the
// CAs, serving and client certificates of a hosted control plane. Keys are
// ECDSA P-256; every certificate is backdated by a clock-skew grace and is
// due for renewal once RenewFraction of its life has passed.
package pki
