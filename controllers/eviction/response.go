package eviction

import (
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// admissionResponse refuses with 429 Too Many Requests, which kubectl
// drain and other eviction callers retry, as an exhausted
// PodDisruptionBudget answers.
func admissionResponse(msg string) admissionv1.AdmissionResponse {
	return admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusTooManyRequests, Reason: metav1.StatusReasonTooManyRequests, Message: msg,
	}}
}
