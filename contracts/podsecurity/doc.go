// Package podsecurity is the one home of the security contexts that make
// tekvirt's Pods meet Pod Security "restricted" (launcher Pods, the hosted
// control plane), and of the check that they do, with Pod Security
// Admission's own rules.
package podsecurity
