package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	admissionmetrics "sigs.k8s.io/controller-runtime/pkg/webhook/admission/metrics"

	"github.com/webhook-guard/webhook-guard/policy"
)

// MaxReviewBytes bounds a request body, as controller-runtime's admission
// webhook does: two objects of at most 3 MB each (twice etcd's 1.5 MB
// request limit) plus the rest of the review. It is the server's
// MaxRequestBytes, so the handler, not the server, answers the 413.
const MaxReviewBytes = MaxRequestBytes

// The AdmissionReview versions the guard answers. The static manifest asks
// for v1 only; v1beta1 has the same shape and is answered in kind, as
// controller-runtime's admission webhook did.
const (
	reviewV1      = "admission.k8s.io/v1"
	reviewV1beta1 = "admission.k8s.io/v1beta1"
	reviewKind    = "AdmissionReview"
)

// Verdict is the answer to one AdmissionReview body.
type Verdict struct {
	// APIVersion is the AdmissionReview version to answer in: the review's
	// own, admission.k8s.io/v1 or v1beta1.
	APIVersion string
	// Response is the admission response, its uid the request's.
	Response *admissionv1.AdmissionResponse
	// Decision is what was decided; nil when the review was rejected before
	// a decision (malformed, too large, or a recovered panic: Response says
	// why, with a 4xx or 5xx code).
	Decision *policy.Decision
	// Entries are the entries of the object the request writes, as decoded
	// and decided on (names, caBundles, endpoints): what `check
	// --served-chain` names. Nil without a decision, for a request that
	// writes no object (a DELETE) and for a generated admission policy
	// object.
	Entries []policy.Entry
}

var _ http.Handler = &Handler{}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// ServeHTTP serves AdmissionReviews: it reads the body and answers with
// Review. Register it with the webhook server's Register so that
// controller-runtime's webhook metrics (latency, requests, in flight) wrap
// it. A body over MaxReviewBytes is a 413; an empty body, a Content-Type
// other than application/json and an undecodable or malformed review are
// answered with code 400 and allowed: false.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	apiVersion := reviewV1
	defer func() { _ = r.Body.Close() }()
	buf := bufPool.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 1<<20 { // do not keep a huge review's buffer alive
			buf.Reset()
			bufPool.Put(buf)
		}
	}()
	buf.Reset()
	n, err := buf.ReadFrom(io.LimitReader(r.Body, MaxReviewBytes+1))
	if err != nil {
		h.writeError(r.Context(), w, apiVersion, "", http.StatusBadRequest, fmt.Errorf("unable to read the request body: %w", err))
		return
	}
	if code, err := checkBodySize(n); err != nil {
		h.writeError(r.Context(), w, apiVersion, "", code, err)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		h.writeError(r.Context(), w, apiVersion, "", http.StatusBadRequest, fmt.Errorf("contentType=%s, expected application/json", ct))
		return
	}
	v := h.review(r.Context(), buf.Bytes())
	h.write(w, v.APIVersion, v.Response)
}

// checkBodySize rejects an empty or oversized body, over HTTP or from a file.
func checkBodySize(n int64) (int32, error) {
	switch {
	case n == 0:
		return http.StatusBadRequest, errors.New("request body is empty: the body holds no admission request")
	case n > MaxReviewBytes:
		return http.StatusRequestEntityTooLarge, fmt.Errorf("request entity is too large; limit is %d bytes", MaxReviewBytes)
	}
	return 0, nil
}

// Review decides one AdmissionReview body (JSON): ServeHTTP without the
// HTTP. `check` answers its review file with it, and a benchmark of the
// decision path without a socket measures it.
func (h *Handler) Review(ctx context.Context, body []byte) Verdict {
	if code, err := checkBodySize(int64(len(body))); err != nil {
		return Verdict{APIVersion: reviewV1, Response: h.errored(ctx, "", code, err)}
	}
	return h.review(ctx, body)
}

func (h *Handler) review(ctx context.Context, body []byte) Verdict {
	review, err := decodeReview(body)
	if err != nil {
		return Verdict{APIVersion: reviewV1, Response: h.errored(ctx, "", http.StatusBadRequest, err)}
	}
	v := Verdict{APIVersion: reviewV1}
	if review.APIVersion == reviewV1beta1 && review.Kind == reviewKind {
		v.APIVersion = reviewV1beta1
	}
	// The review's own apiVersion and kind are not otherwise checked, as
	// controller-runtime's admission webhook did not: a request that is not
	// about a guarded kind is refused in handle.
	v.Response, v.Decision, v.Entries = h.handle(ctx, review.Request)
	return v
}

// handle decides a decoded request, recovering a panic into a 500 exactly
// as controller-runtime's admission.Webhook does; entries are the decided
// input's (Verdict.Entries).
func (h *Handler) handle(ctx context.Context, req *reviewRequest) (resp *admissionv1.AdmissionResponse, d *policy.Decision, entries []policy.Entry) {
	defer func() {
		if p := recover(); p != nil {
			admissionmetrics.WebhookPanics.WithLabelValues().Inc()
			for _, fn := range utilruntime.PanicHandlers {
				fn(ctx, p)
			}
			resp, d, entries = &admissionv1.AdmissionResponse{UID: req.UID, Result: &metav1.Status{
				Code:    http.StatusInternalServerError,
				Message: fmt.Sprintf("panic: %v [recovered]", p),
			}}, nil, nil
		}
	}()
	ctx = withRequestFields(logf.IntoContext(ctx, h.Log), "kind", req.Kind.Kind, "name", req.Name,
		"operation", req.Operation, "user", req.UserInfo.Username, "requestID", req.UID)
	// One allocation for the two answers the caller keeps.
	var v struct {
		d policy.Decision
		r admissionv1.AdmissionResponse
	}
	if req.isAdmissionPolicyObject() {
		v.d, v.r = h.decideAdmissionPolicyObject(ctx, req.admissionPolicyObjectInput(h.AdmissionPolicyWriter))
	} else {
		in, err := req.input()
		if err != nil {
			return h.errored(ctx, req.UID, http.StatusBadRequest, err), nil, nil
		}
		v.d, v.r = h.decideAndRespond(ctx, in)
		entries = in.Entries
	}
	v.r.UID = req.UID
	return &v.r, &v.d, entries
}

// errored counts and logs a malformed review and answers it.
func (h *Handler) errored(ctx context.Context, uid types.UID, code int32, err error) *admissionv1.AdmissionResponse {
	if code == http.StatusBadRequest {
		h.Metrics.InvalidRequests.Inc()
	}
	log := requestLog(ctx)
	if log.GetSink() == nil {
		log = h.Log
	}
	log.Info("rejecting a malformed admission review", "reason", err.Error())
	return &admissionv1.AdmissionResponse{UID: uid, Result: &metav1.Status{Code: code, Message: err.Error()}}
}

func (h *Handler) writeError(ctx context.Context, w http.ResponseWriter, apiVersion string, uid types.UID, code int32, err error) {
	h.write(w, apiVersion, h.errored(ctx, uid, code, err))
}

// reviewResponse is the AdmissionReview the guard answers with.
type reviewResponse struct {
	APIVersion string                         `json:"apiVersion"`
	Kind       string                         `json:"kind"`
	Response   *admissionv1.AdmissionResponse `json:"response"`
}

// write encodes the response; the HTTP status is 200 whatever the admission
// code, as kube-apiserver expects.
func (h *Handler) write(w http.ResponseWriter, apiVersion string, resp *admissionv1.AdmissionResponse) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(reviewResponse{APIVersion: apiVersion, Kind: reviewKind, Response: resp}); err != nil {
		// The response is a plain struct that always encodes: the write
		// failed (the client went away); there is nobody left to answer.
		h.Log.Error(err, "unable to write the admission response", "requestID", resp.UID)
	}
}
