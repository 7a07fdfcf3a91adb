package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/go-logr/logr"
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

// admissionReview is an AdmissionReview as the guard reads it: the request
// and the two objects in one pass, skipping every field the decision does
// not read.
//
// It is decoded with github.com/go-json-experiment/json, the module that
// mirrors encoding/json/v2 (an experiment in Go 1.25/1.26, the standard
// library's in Go 1.27). With its defaults it is at least as strict as
// kube-apiserver's own decoder (sigs.k8s.io/json): member names match
// case-sensitively ("Request", "UID" or "CABundle" are not read), and the
// whole input is validated, skipped members included. It is stricter in two
// ways kube-apiserver's reviews never meet: a duplicate member name and
// invalid UTF-8 are errors (answered 400, never allowed). It decodes a
// review in about a third of the time of encoding/json or sigs.k8s.io/json
// (`make bench`).
type admissionReview struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Request    *reviewRequest `json:"request"`
}

// ReviewHandler serves AdmissionReviews for the guard over HTTP: it decodes
// the review and both objects in a single pass straight into the minimal
// types the decision reads, calls Handler, and encodes the response. It
// replaces controller-runtime's generic admission.Webhook, which decodes the
// review with the universal deserializer and leaves the objects as raw
// bytes to be decoded a second time. What the generic path did is kept:
// register it with the webhook server's Register so controller-runtime's
// webhook metrics (latency, requests, in flight) wrap it; a body over
// MaxReviewBytes is a 413; an empty body, a Content-Type other than
// application/json and an undecodable or malformed review are answered with
// code 400 and allowed: false; a panic is recovered, counted in
// controller_runtime_webhook_panics_total and answered with a 500.
type ReviewHandler struct {
	Handler *Handler
	// Log is the base logger; per-request fields are added to it.
	// controller-runtime's "admission" logger when zero.
	Log logr.Logger

	logOnce sync.Once
}

var _ http.Handler = &ReviewHandler{}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// defaultLog gives a zero Log controller-runtime's "admission" logger.
func (rh *ReviewHandler) defaultLog() {
	if rh.Log.GetSink() == nil {
		rh.Log = logf.Log.WithName("admission")
	}
}

// ServeHTTP implements http.Handler.
func (rh *ReviewHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rh.logOnce.Do(rh.defaultLog)
	apiVersion := reviewV1
	if r.Body == nil || r.Body == http.NoBody {
		rh.writeError(w, apiVersion, "", http.StatusBadRequest, errors.New("request body is empty"))
		return
	}
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
		rh.writeError(w, apiVersion, "", http.StatusBadRequest, fmt.Errorf("unable to read the request body: %w", err))
		return
	}
	if n == 0 {
		rh.writeError(w, apiVersion, "", http.StatusBadRequest, errors.New("request body is empty: the body holds no admission request"))
		return
	}
	if n > MaxReviewBytes {
		rh.writeError(w, apiVersion, "", http.StatusRequestEntityTooLarge, fmt.Errorf("request entity is too large; limit is %d bytes", MaxReviewBytes))
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		rh.writeError(w, apiVersion, "", http.StatusBadRequest, fmt.Errorf("contentType=%s, expected application/json", ct))
		return
	}
	resp, apiVersion := rh.review(r.Context(), buf.Bytes())
	rh.write(w, apiVersion, resp)
}

// Review decides one AdmissionReview body and returns the response and the
// AdmissionReview apiVersion to answer with. It is ServeHTTP without the
// HTTP: what a benchmark of the decision path without a socket measures.
func (rh *ReviewHandler) Review(ctx context.Context, body []byte) (resp *admissionv1.AdmissionResponse, apiVersion string) {
	rh.logOnce.Do(rh.defaultLog)
	return rh.review(ctx, body)
}

func (rh *ReviewHandler) review(ctx context.Context, body []byte) (resp *admissionv1.AdmissionResponse, apiVersion string) {
	apiVersion = reviewV1
	var review admissionReview
	if err := jsonv2.Unmarshal(body, &review); err != nil {
		return rh.errored(ctx, "", http.StatusBadRequest, decodeError(&review, err)), apiVersion
	}
	if review.APIVersion == reviewV1beta1 && review.Kind == reviewKind {
		apiVersion = reviewV1beta1
	}
	// Like the generic path, the review's own apiVersion and kind are not
	// checked: a request that is not about a guarded kind is refused below.
	if review.Request == nil {
		review.Request = &reviewRequest{}
	}
	return rh.handle(ctx, review.Request), apiVersion
}

// decodeError words a decode failure as the generic path did: a syntax
// error is a "json parse error", a type error inside an object says which
// object did not decode.
func decodeError(review *admissionReview, err error) error {
	var syn *jsontext.SyntacticError
	if errors.As(err, &syn) {
		return fmt.Errorf("json parse error: %w", err)
	}
	var sem *jsonv2.SemanticError
	if errors.As(err, &sem) && review.Request != nil {
		for _, field := range []struct{ ptr, name string }{{"/request/object", fieldObject}, {"/request/oldObject", fieldOldObject}} {
			if p := string(sem.JSONPointer); p == field.ptr || strings.HasPrefix(p, field.ptr+"/") {
				return inputErrorf("%s does not decode as a %s: %v", field.name, review.Request.Kind.Kind, err)
			}
		}
	}
	return fmt.Errorf("cannot decode the AdmissionReview: %w", err)
}

// handle decides a decoded request, recovering a panic into a 500 exactly
// as controller-runtime's admission.Webhook does.
func (rh *ReviewHandler) handle(ctx context.Context, req *reviewRequest) (resp *admissionv1.AdmissionResponse) {
	defer func() {
		if p := recover(); p != nil {
			admissionmetrics.WebhookPanics.WithLabelValues().Inc()
			for _, fn := range utilruntime.PanicHandlers {
				fn(ctx, p)
			}
			resp = &admissionv1.AdmissionResponse{UID: req.UID, Result: &metav1.Status{
				Code:    http.StatusInternalServerError,
				Message: fmt.Sprintf("panic: %v [recovered]", p),
			}}
		}
	}()
	ctx = withRequestFields(logf.IntoContext(ctx, rh.Log), "kind", req.Kind.Kind, "name", req.Name,
		"operation", req.Operation, "user", req.UserInfo.Username, "requestID", req.UID)
	if isPolicyKind(req.Kind) {
		// Policy mode's generated objects (policyobjects.go).
		user := policy.User{Username: req.UserInfo.Username, Groups: req.UserInfo.Groups}
		r := rh.Handler.policyObjectDecision(ctx, string(req.Operation), req.Kind.Kind, req.Name, user, managedByGuard(req.Object) || managedByGuard(req.OldObject))
		r.UID = req.UID
		return &r.AdmissionResponse
	}
	in, err := req.input(func(field string, kind policy.ConfigKind) (*webhookConfiguration, error) {
		obj := req.Object
		if field == fieldOldObject {
			obj = req.OldObject
		}
		if obj == nil {
			return nil, inputErrorf("%s is missing", field)
		}
		return checkObject(field, obj, kind)
	})
	if err != nil {
		return rh.errored(ctx, req.UID, http.StatusBadRequest, err)
	}
	r := rh.Handler.decideAndRespond(ctx, in)
	r.UID = req.UID
	return &r.AdmissionResponse
}

// errored counts and logs a malformed review and answers it.
func (rh *ReviewHandler) errored(ctx context.Context, uid types.UID, code int32, err error) *admissionv1.AdmissionResponse {
	if code == http.StatusBadRequest {
		rh.Handler.Metrics.InvalidRequests.Inc()
	}
	log := requestLog(ctx)
	if log.GetSink() == nil {
		log = rh.Log
	}
	log.Info("rejecting a malformed admission review", "reason", err.Error())
	return &admissionv1.AdmissionResponse{UID: uid, Result: &metav1.Status{Code: code, Message: err.Error()}}
}

func (rh *ReviewHandler) writeError(w http.ResponseWriter, apiVersion string, uid types.UID, code int32, err error) {
	rh.write(w, apiVersion, rh.errored(context.Background(), uid, code, err))
}

// reviewResponse is the AdmissionReview the guard answers with.
type reviewResponse struct {
	APIVersion string                         `json:"apiVersion"`
	Kind       string                         `json:"kind"`
	Response   *admissionv1.AdmissionResponse `json:"response"`
}

// write encodes the response; the HTTP status is 200 whatever the admission
// code, as kube-apiserver expects.
func (rh *ReviewHandler) write(w http.ResponseWriter, apiVersion string, resp *admissionv1.AdmissionResponse) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(reviewResponse{APIVersion: apiVersion, Kind: reviewKind, Response: resp}); err != nil {
		// The response is a plain struct that always encodes: the write
		// failed (the client went away); there is nobody left to answer.
		rh.Log.Error(err, "unable to write the admission response", "requestID", resp.UID)
	}
}
